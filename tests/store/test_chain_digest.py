"""The hash chain's digest is hashlib's BLAKE2b-128 of each stored payload. It was computed in C
(engine/_chainhash.c) until that extension was dropped; a log written then verifies now, because
the digests are the same bytes."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import msgspec

import engine._store.codec as codec
from engine import EstimateCounter, Ledger

WRITTEN_WITH_C = Path(__file__).parents[1] / "data" / "chain" / "written-with-c-digest.jsonl"


def reference(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=codec.CHAIN_DIGEST_SIZE).digest()


def test_a_log_written_with_the_default_digest_verifies_with_hashlib_alone(tmp_path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'l.db'}", token_counter=EstimateCounter())
    s = ledger.create_session("a")
    with s.batch():
        for i in range(50):
            s.observe(f"observation {i} " + "x" * (i * 37), tokens=3)
    s.prune("o3")
    events = list(s.events())
    for ev, successor in zip(events, events[1:]):
        assert successor.prev == reference(codec.encode_payload(msgspec.structs.replace(ev, originator_id=None)))
    assert s.verify().ok
    ledger.close()


def test_a_log_whose_chain_was_hashed_in_c_imports_and_verifies(tmp_path):
    """tests/data/chain/written-with-c-digest.jsonl is the export of a session (observes in a batch, a
    prune, a rewrite, a restore) written while engine/_chainhash.c computed every digest: its
    ``hash`` fields and each event's ``prev`` are the C digests."""
    lines = WRITTEN_WITH_C.read_text(encoding="utf-8").splitlines()
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'l.db'}", token_counter=EstimateCounter())
    s = ledger.import_(WRITTEN_WITH_C)  # checks every line's hash and its chain to the line before
    check = s.verify()
    assert check.ok and check.position == len(lines) == 44
    assert check.head == msgspec.json.decode(lines[-1])["hash"]
    ledger.close()


def test_the_c_digest_is_gone():
    assert importlib.util.find_spec("engine._chainhash") is None
    assert not list(Path(codec.__file__).parents[1].rglob("_chainhash*"))  # engine/, its subpackages too
