"""What the CLI, the fleet and the viewer ask the ledger instead of reaching the eventsourcing
recorder behind its store (issue 25): which kind of store it is, whether it encrypts, its URL fit
for a message, whether a file is a ctxledger export, and the notification log a view folds."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from conftest import drop_schema, postgres_url

from engine import EstimateCounter, Ledger
from engine._store.codec import TOPICS
from engine.events import Observed

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_backend_names_the_kind_of_store(kind, tmp_path):
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 'l.db'}"}.get(kind) or postgres_url()
    try:
        with Ledger.open(url, token_counter=EstimateCounter()) as led:
            assert led.backend == kind and led.store.backend == kind
            assert led.encrypted is False
            env = led.store.environment
            env["PERSISTENCE_MODULE"] = "changed"  # a copy: the store's own is untouched
            assert led.backend == kind
    finally:
        if kind == "postgres":
            drop_schema(url)


def test_an_encrypted_store_says_so(tmp_path):
    key = base64.b64encode(os.urandom(32)).decode()  # AES-GCM: the crypto extra
    with Ledger.open(f"sqlite:///{tmp_path / 'e.db'}", token_counter=EstimateCounter(), cipher_key=key) as led:
        assert led.encrypted is True and led.store.encrypted is True


def test_display_url_never_shows_the_password():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    assert led.display_url == "memory://"
    led.url = "postgresql://ops:hunter2@db.example:5432/ledger"
    assert led.display_url == "postgresql://ops:***@db.example:5432/ledger" and "hunter2" not in repr(led)
    led.close()


def test_looks_like_export_tells_an_export_from_a_transcript(tmp_path):
    with Ledger.open("memory://", token_counter=EstimateCounter()) as led:
        s = led.create_session("x")
        s.observe("hello")
        s.export(tmp_path / "x.jsonl")
    assert Ledger.looks_like_export(str(tmp_path / "x.jsonl"))
    assert not Ledger.looks_like_export(str(DATA / "messages" / "openai.jsonl"))


def test_notifications_page_through_the_global_log(tmp_path):
    with Ledger.open(f"sqlite:///{tmp_path / 'n.db'}", token_counter=EstimateCounter()) as led:
        s = led.create_session("n")
        for i in range(5):
            s.observe(f"line {i}")
        every = led.store.notifications(0, 100)
        observed = led.store.notifications(0, 100, [TOPICS[Observed]])
        assert len(observed) == 5 and {n.topic for n in observed} == {TOPICS[Observed]}
        after = led.store.notifications(every[2].id, 2)
        assert [n.id for n in after] == [n.id for n in every[3:5]]
