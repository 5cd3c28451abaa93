"""Signed checkpoints: what the hash chain alone cannot catch (a changed or deleted last event, a
history rewritten and re-chained) is caught by a checkpoint a third party checks without the
database, with nothing but the checkpoint file, the public key and (optionally) an export."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import subprocess

import msgspec
import pytest
from click.testing import CliRunner

from engine import EstimateCounter, InvalidInputError, Ledger, CorruptLogError
from engine.checkpoint import (
    Checkpoint,
    append_checkpoint,
    check_export,
    check_session,
    generate_keypair,
    load_private_key,
    load_public_key,
    read_checkpoints,
    sign,
    signature_ok,
)
from engine.cli import main
from engine._store.codec import chain_hash, decode_payload, encode_payload


@pytest.fixture
def keys(tmp_path):
    priv, pub, kid = generate_keypair(tmp_path / "ops.pem")
    return priv, pub


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session("agent-42")
    for i in range(1, 7):
        s.observe(f"turn {i}: deploy {i} finished")
    yield url, led, s, tmp_path / "ledger.db"
    led.close()


def rows_sql(path, statement, params=()):
    con = sqlite3.connect(path)
    try:
        out = con.execute(statement, params).fetchall()
        con.commit()
        return out
    finally:
        con.close()


def test_keygen_writes_a_private_key_only_its_owner_can_read(keys):
    priv, pub = keys
    assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600
    assert b"PRIVATE KEY" in priv.read_bytes() and b"PUBLIC KEY" in pub.read_bytes()
    with pytest.raises(InvalidInputError, match="exists already"):
        generate_keypair(priv)


def test_a_checkpoint_verifies_and_names_what_it_vouches_for(store, keys):
    url, led, s, _ = store
    cp = sign(s, keys[0])
    assert cp.position == 7 and cp.head == s.verify().head
    assert cp.prev == s.event(7).prev.hex()
    assert signature_ok(cp, keys[1])
    r = check_session(s, [cp], keys[1])
    assert r.ok and "1..7" in r.reason


def test_the_signature_covers_every_field(store, keys):
    _, _, s, _ = store
    cp = sign(s, keys[0])
    for field, value in [("position", 6), ("head", "0" * 32), ("prev", "1" * 32), ("session", "other"), ("signed_at", "2020-01-01T00:00:00Z")]:
        forged = msgspec.structs.replace(cp, **{field: value})
        assert not signature_ok(forged, keys[1]), field
    r = check_session(s, [msgspec.structs.replace(cp, head="0" * 32)], keys[1])
    assert not r.ok and r.first_bad_position is None and "invalid signature" in r.reason


def test_another_key_does_not_verify(store, keys, tmp_path):
    _, _, s, _ = store
    _, other_pub, _ = generate_keypair(tmp_path / "other.pem")
    cp = sign(s, keys[0])
    assert not signature_ok(cp, other_pub)
    r = check_session(s, [cp], other_pub)
    assert not r.ok and "signed by key" in r.reason


def test_a_third_party_checks_the_signature_with_openssl(store, keys, tmp_path):
    """The statement format is documented: any Ed25519 implementation can check it."""
    _, _, s, _ = store
    cp = sign(s, keys[0])
    (tmp_path / "msg").write_bytes(cp.statement())
    (tmp_path / "sig").write_bytes(base64.b64decode(cp.signature))
    try:
        out = subprocess.run(
            ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(keys[1]), "-rawin",
             "-in", str(tmp_path / "msg"), "-sigfile", str(tmp_path / "sig")],
            capture_output=True, text=True, check=False,
        )
    except FileNotFoundError:
        pytest.skip("openssl is not installed")
    assert out.returncode == 0 and "Signature Verified Successfully" in out.stdout
    (tmp_path / "msg").write_bytes(cp.statement().replace(b"position=7", b"position=8"))
    bad = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(keys[1]), "-rawin",
         "-in", str(tmp_path / "msg"), "-sigfile", str(tmp_path / "sig")],
        capture_output=True, text=True, check=False,
    )
    assert bad.returncode != 0


def test_a_changed_last_event_is_caught_only_by_the_checkpoint(store, keys):
    url, led, s, path = store
    cp = sign(s, keys[0])
    topic, state = rows_sql(path, "SELECT topic, state FROM stored_events WHERE originator_id=? AND originator_version=7", (s.id.hex,))[0]
    ev = decode_payload(topic, state)
    changed = encode_payload(msgspec.structs.replace(ev, text="turn 6: deploy 6 FAILED"))
    rows_sql(path, "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=7", (changed, s.id.hex))
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    assert fresh.verify("agent-42").ok  # the chain alone cannot tell
    r = check_session(fresh.session("agent-42"), [cp], keys[1])
    assert not r.ok and r.first_bad_position == 7 and "changed" in r.reason
    fresh.close()


def test_a_deleted_last_event_is_caught_only_by_the_checkpoint(store, keys):
    url, led, s, path = store
    cp = sign(s, keys[0])
    rows_sql(path, "DELETE FROM stored_events WHERE originator_id=? AND originator_version=7", (s.id.hex,))
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    assert fresh.verify("agent-42").ok
    r = check_session(fresh.session("agent-42"), [cp], keys[1])
    assert not r.ok and r.first_bad_position == 7 and "deleted" in r.reason
    fresh.close()


def test_a_rewritten_and_rechained_history_is_caught(store, keys):
    """An attacker with write access changes event 3 and recomputes every ``prev`` after it: the
    chain verifies, the checkpoint does not, and an earlier checkpoint bounds where it happened."""
    url, led, s, path = store
    early = sign(s.at(2), keys[0])
    late = sign(s, keys[0])
    rows = rows_sql(path, "SELECT originator_version, topic, state FROM stored_events WHERE originator_id=? ORDER BY originator_version", (s.id.hex,))
    prev = b""
    for version, topic, state in rows:
        ev = decode_payload(topic, state)
        if version == 3:
            ev = msgspec.structs.replace(ev, text="turn 2: the migration completed at 14:02")
        payload = encode_payload(msgspec.structs.replace(ev, prev=prev))
        rows_sql(path, "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=?", (payload, s.id.hex, version))
        prev = chain_hash(payload)
    rows_sql(path, "DELETE FROM stored_snapshots")
    fresh = Ledger.open(url, token_counter=EstimateCounter())
    assert fresh.verify("agent-42").ok
    r = check_session(fresh.session("agent-42"), [early, late], keys[1])
    assert not r.ok and r.first_bad_position == 3, r.reason
    assert "recomputed" in r.reason
    fresh.close()


def test_a_broken_chain_is_never_signed(store, keys):
    url, led, s, path = store
    rows_sql(path, "DELETE FROM stored_events WHERE originator_id=? AND originator_version=3", (s.id.hex,))
    with pytest.raises(CorruptLogError, match="refusing to sign"):
        sign(s, keys[0])
    res = CliRunner().invoke(main, ["--db", url, "checkpoint", "agent-42", "--key", str(keys[0])])
    assert res.exit_code == 1 and "NOT SIGNED" in res.output


def test_checkpoint_files_append_and_read_back(store, keys, tmp_path):
    _, _, s, _ = store
    f = tmp_path / "cps.jsonl"
    a = sign(s, keys[0])
    s.observe("more")
    b = sign(s, keys[0])
    append_checkpoint(a, f)
    append_checkpoint(b, f)
    assert read_checkpoints(f) == [a, b]
    assert check_session(s, read_checkpoints(f), keys[1]).ok


@pytest.mark.parametrize(
    "content",
    [b"", b"not json\n", b'{"format":"ctxledger-checkpoint/1"}\n', b"\xff\xfe\n", b"[1,2,3]\n",
     b'{"format":"other/9","session":"a","session_id":"00000000-0000-0000-0000-000000000000","position":1,"head":"","signed_at":"x","key_id":"k","signature":"s"}\n',
     b'{"format":"ctxledger-checkpoint/1","session":"a","session_id":"00000000-0000-0000-0000-000000000000","position":0,"head":"","signed_at":"x","key_id":"k","signature":"s"}\n'],
)
def test_malformed_checkpoint_files_are_typed_errors(tmp_path, content):
    f = tmp_path / "bad.jsonl"
    f.write_bytes(content)
    with pytest.raises(InvalidInputError):
        read_checkpoints(f)


@pytest.mark.parametrize("content", [b"", b"garbage", b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"])
def test_malformed_keys_are_typed_errors(tmp_path, content):
    f = tmp_path / "k.pem"
    f.write_bytes(content)
    with pytest.raises(InvalidInputError):
        load_public_key(f)
    with pytest.raises(InvalidInputError):
        load_private_key(f)
    with pytest.raises(InvalidInputError):
        load_private_key(tmp_path / "missing.pem")


def test_a_public_key_is_not_a_private_key(keys):
    with pytest.raises(InvalidInputError):
        load_private_key(keys[1])


def test_an_export_is_checked_without_any_database(store, keys, tmp_path):
    url, led, s, path = store
    cp = sign(s, keys[0])
    export = tmp_path / "agent-42.jsonl"
    s.export(export)
    (name, r), = check_export(export, [cp], keys[1])
    assert name == "agent-42" and r.ok
    # the export's last line edited and re-hashed by hand: the chain of the file is fine, the
    # checkpoint is not
    lines = export.read_text().splitlines()
    last = json.loads(lines[-1])
    last["event"]["text"] = "turn 6: deploy 6 FAILED"
    from engine._store.transfer import EVENT_DECODERS

    ev = EVENT_DECODERS["Observed"].decode(json.dumps(last["event"]))
    last["hash"] = chain_hash(encode_payload(ev)).hex()
    lines[-1] = json.dumps(last)
    export.write_text("\n".join(lines) + "\n")
    (name, r), = check_export(export, [cp], keys[1])
    assert not r.ok and r.first_bad_position == 7


def test_cli_round_trip_of_keygen_checkpoint_and_verify(store, keys, tmp_path):
    url, led, s, path = store
    runner = CliRunner()
    cps = tmp_path / "cps.jsonl"
    res = runner.invoke(main, ["--db", url, "checkpoint", "--all", "--key", str(keys[0]), "-o", str(cps)])
    assert res.exit_code == 0, res.output
    assert len(read_checkpoints(cps)) == 1
    res = runner.invoke(main, ["--db", url, "verify", "agent-42", "--checkpoint", str(cps), "--public-key", str(keys[1])])
    assert res.exit_code == 0 and "vouching for positions 1..7" in res.output
    res = runner.invoke(main, ["verify-checkpoint", str(cps), "--public-key", str(keys[1]), "--signatures-only"])
    assert res.exit_code == 0 and "signature valid" in res.output
    export = tmp_path / "e.jsonl"
    s.export(export)
    res = runner.invoke(main, ["verify-checkpoint", str(cps), "--public-key", str(keys[1]), "--export", str(export)])
    assert res.exit_code == 0, res.output
    # the last event deleted: the chain is fine, the checkpoint is not
    rows_sql(path, "DELETE FROM stored_events WHERE originator_id=? AND originator_version=7", (s.id.hex,))
    res = runner.invoke(main, ["--db", url, "verify", "agent-42"])
    assert res.exit_code == 0
    res = runner.invoke(main, ["--db", url, "verify", "agent-42", "--checkpoint", str(cps), "--public-key", str(keys[1])])
    assert res.exit_code == 1 and "BROKEN at position 7" in res.output
    res = runner.invoke(main, ["--db", url, "verify-checkpoint", str(cps), "--public-key", str(keys[1]), "--json"])
    assert res.exit_code == 1 and json.loads(res.output)[0]["first_bad_position"] == 7


def test_a_deleted_session_is_caught_by_verify_all_with_checkpoints(store, keys, tmp_path):
    url, led, s, path = store
    other = led.create_session("bystander")
    other.observe("x")
    cps = tmp_path / "cps.jsonl"
    append_checkpoint(sign(s, keys[0]), cps)
    rows_sql(path, "DELETE FROM stored_events WHERE originator_id=?", (s.id.hex,))
    rows_sql(path, "DELETE FROM stored_snapshots WHERE originator_id=?", (s.id.hex,))
    res = CliRunner().invoke(main, ["--db", url, "verify", "--all", "--checkpoint", str(cps), "--public-key", str(keys[1])])
    assert res.exit_code == 1
    assert "agent-42: BROKEN at position 1: the session is missing from the store" in res.output
    assert "bystander: OK" in res.output and "no checkpoint" in res.output


def test_cli_errors_are_one_line_and_typed(tmp_path, keys):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    runner = CliRunner()
    res = runner.invoke(main, ["--db", url, "checkpoint", "nosuch", "--key", str(keys[0])])
    assert res.exit_code == 2 and res.output.startswith("ctxledger: error:")
    res = runner.invoke(main, ["--db", url, "checkpoint", "x", "--key", str(tmp_path / "missing.pem")])
    assert res.exit_code == 2 and "cannot read the private key file" in res.output
    res = runner.invoke(main, ["--db", url, "verify", "x", "--checkpoint", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2 and "go together" in res.output


def test_checkpoint_struct_rejects_unknown_fields():
    line = b'{"format":"ctxledger-checkpoint/1","session":"a","session_id":"00000000-0000-0000-0000-000000000000","position":1,"head":"","signed_at":"x","key_id":"k","signature":"s","evil":1}'
    with pytest.raises(InvalidInputError):
        read_checkpoints([line])
    assert isinstance(Checkpoint, type)
