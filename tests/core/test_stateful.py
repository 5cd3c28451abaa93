"""The rules, checked against a simple model after every step of random command sequences.

The model is a plain dict of live spans plus each span's fate; the real thing is the event-sourced
Session. After every step: the buffer equals the model, the invariants hold, the buffer rebuilt
from the log (with and without snapshots) equals what was live at that position, the chain verifies.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine import (
    EstimateCounter,
    InvalidInputError,
    Ledger,
    Provenance,
    RewritePolicyError,
    SpanNotLiveError,
    SpanStateError,
    UnknownSpanError,
)

WORDS = st.sampled_from(["alpha", "beta 3", "gamma 14:02", "delta-svc", "e/f.txt", "ζ", "x" * 50])
TEXTS = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)


class Model:
    """What the buffer should be, computed without events."""

    def __init__(self):
        self.live: dict[str, dict] = {}
        self.fate: dict[str, str] = {}
        self.content: dict[str, dict] = {}  # last known content of every span ever made
        self.n_obs = 0
        self.n_der = 0

    def order(self, span):
        if span["provenance"] == "observed":
            return int(span["id"][1:])
        return min(int(s[1:]) for s in span["sources"])

    def buffer(self):
        return [
            (s["id"], s["text"], s["provenance"], s["generation"], tuple(s["sources"]))
            for s in sorted(self.live.values(), key=self.order)
        ]

    def known(self, span_id):
        return span_id in self.content


def snapshot(session):
    return [(s.id, s.text, s.provenance.value, s.generation, s.sources) for s in session.spans()]


class LedgerMachine(RuleBasedStateMachine):
    url = "memory://"

    def __init__(self):
        super().__init__()
        self.ledger = Ledger.open(self.url, token_counter=EstimateCounter())
        self.ledger.snapshot_min_bytes = 64  # snapshot often, so time travel crosses snapshots
        self.session = self.ledger.create_session("machine")
        self.model = Model()
        self.history = {1: []}  # position -> expected buffer
        self.batch = None  # an open ``with session.batch():`` block, entered by a rule

    def teardown(self):
        s = self.session
        if self.batch is not None:
            self.end_batch()
        for n, expected in self.history.items():
            assert snapshot(s.at(n)) == expected, f"time travel to {n} differs"
        reopened = self.ledger.session("machine")
        assert snapshot(reopened) == self.model.buffer()
        assert reopened.state == s.state
        self.ledger.close()

    # -- helpers ------------------------------------------------------------------------------

    def ids(self):
        return sorted(self.model.content) or ["o1"]

    def pick(self, data, derived_bias=False):
        """Mostly live spans (derived ones first when asked), sometimes dead ones, rarely unknown ids."""
        roll = data.draw(st.integers(0, 19))
        live = sorted(self.model.live)
        derived = [i for i in live if i.startswith("d")]
        if derived_bias and derived and roll < 10:
            return data.draw(st.sampled_from(derived))
        if live and roll < 15:
            return data.draw(st.sampled_from(live))
        if roll < 19 or not self.model.content:
            return data.draw(st.sampled_from(self.ids()))
        return data.draw(st.sampled_from(["o999", "d999", "x1", "o0"]))

    def record(self):
        self.history[self.session.position] = self.model.buffer()

    def expect_unchanged(self, before):
        assert self.session.position == before

    # -- rules --------------------------------------------------------------------------------

    @rule(text=TEXTS)
    def observe(self, text):
        span = self.session.observe(text, by="tester")
        self.model.n_obs += 1
        sid = f"o{self.model.n_obs}"
        assert span.id == sid and span.provenance is Provenance.OBSERVED and span.generation == 0
        entry = {"id": sid, "text": text, "provenance": "observed", "generation": 0, "sources": ()}
        self.model.live[sid] = entry
        self.model.content[sid] = entry
        self.model.fate[sid] = "live"
        self.record()

    @precondition(lambda self: self.model.content)
    @rule(data=st.data())
    def prune(self, data):
        sid = self.pick(data)
        before = self.session.position
        if not self.model.known(sid):
            with pytest.raises(UnknownSpanError):
                self.session.prune(sid)
            return self.expect_unchanged(before)
        if sid not in self.model.live:
            with pytest.raises(SpanNotLiveError):
                self.session.prune(sid)
            return self.expect_unchanged(before)
        self.session.prune(sid, reason="test")
        del self.model.live[sid]
        self.model.fate[sid] = "pruned"
        assert self.session.position == before + 1
        self.record()

    @precondition(lambda self: self.model.content)
    @rule(data=st.data(), text=TEXTS)
    def rewrite(self, data, text):
        live_observed = [i for i in sorted(self.model.live) if i.startswith("o")]
        if live_observed and data.draw(st.integers(0, 3)) > 0:
            ids = data.draw(st.lists(st.sampled_from(live_observed), min_size=1, max_size=4, unique=True))
            if data.draw(st.booleans()):
                extra = self.pick(data, derived_bias=True)
                ids = ids + [extra] if extra not in ids else ids
        else:
            ids = data.draw(st.lists(st.sampled_from(self.ids()), min_size=1, max_size=4, unique=True))
        before = self.session.position
        unknown = [i for i in ids if not self.model.known(i)]
        dead = [i for i in ids if self.model.known(i) and i not in self.model.live]
        derived = [i for i in ids if i in self.model.live and self.model.live[i]["provenance"] == "derived"]
        if unknown:
            with pytest.raises(UnknownSpanError):
                self.session.rewrite(ids, text)
            return self.expect_unchanged(before)
        if dead:
            with pytest.raises(SpanNotLiveError):
                self.session.rewrite(ids, text)
            return self.expect_unchanged(before)
        if derived:
            with pytest.raises(RewritePolicyError):
                self.session.rewrite(ids, text, by="model-x")
            # the refusal itself is recorded; the buffer is unchanged
            assert self.session.position == before + 1
            last = list(self.session.events(self.session.position))[0]
            assert type(last).__name__ == "RewriteRefused" and last.inputs == tuple(ids)
            self.record()
            return
        span = self.session.rewrite(ids, text, by="model-x")
        self.model.n_der += 1
        sid = f"d{self.model.n_der}"
        assert span.id == sid and span.generation == 1 and span.sources == tuple(ids)
        for i in ids:
            del self.model.live[i]
            self.model.fate[i] = "consumed"
        entry = {"id": sid, "text": text, "provenance": "derived", "generation": 1, "sources": tuple(ids)}
        self.model.live[sid] = entry
        self.model.content[sid] = entry
        self.model.fate[sid] = "live"
        self.record()

    @precondition(lambda self: self.model.content)
    @rule(data=st.data(), text=TEXTS, use_rewriter=st.booleans())
    def rederive(self, data, text, use_rewriter):
        sid = self.pick(data, derived_bias=True)
        before = self.session.position
        seen = []

        def rewriter(originals):
            seen.extend(originals)
            return text

        kwargs = {"rewriter": rewriter} if use_rewriter else {"text": text}
        if not self.model.known(sid):
            with pytest.raises(UnknownSpanError):
                self.session.rederive(sid, **kwargs)
            return self.expect_unchanged(before)
        if sid not in self.model.live:
            with pytest.raises(SpanNotLiveError):
                self.session.rederive(sid, **kwargs)
            return self.expect_unchanged(before)
        if self.model.live[sid]["provenance"] == "observed":
            with pytest.raises(SpanStateError):
                self.session.rederive(sid, **kwargs)
            return self.expect_unchanged(before)
        span = self.session.rederive(sid, **kwargs)
        entry = dict(self.model.live[sid], text=text)
        if use_rewriter:
            # the rewriter saw the ORIGINAL observed spans, never the derived text
            assert [s.id for s in seen] == list(entry["sources"])
            assert [s.text for s in seen] == [self.model.content[i]["text"] for i in entry["sources"]]
            assert all(s.provenance is Provenance.OBSERVED for s in seen)
        assert span.generation == 1 and span.id == sid
        self.model.live[sid] = entry
        self.model.content[sid] = entry
        self.record()

    @precondition(lambda self: self.model.content)
    @rule(data=st.data())
    def restore(self, data):
        pruned = [i for i, f in sorted(self.model.fate.items()) if f == "pruned"]
        sid = data.draw(st.sampled_from(pruned)) if pruned and data.draw(st.booleans()) else self.pick(data)
        before = self.session.position
        if not self.model.known(sid):
            with pytest.raises(UnknownSpanError):
                self.session.restore(sid)
            return self.expect_unchanged(before)
        if self.model.fate[sid] != "pruned":
            with pytest.raises(SpanStateError):
                self.session.restore(sid)
            return self.expect_unchanged(before)
        span = self.session.restore(sid)
        assert span.text == self.model.content[sid]["text"]
        self.model.live[sid] = self.model.content[sid]
        self.model.fate[sid] = "live"
        self.record()

    @precondition(lambda self: self.model.content)
    @rule(data=st.data())
    def expand(self, data):
        sid = self.pick(data, derived_bias=True)
        before = self.session.position
        if not self.model.known(sid):
            with pytest.raises(UnknownSpanError):
                self.session.expand(sid)
            return self.expect_unchanged(before)
        if sid not in self.model.live:
            with pytest.raises(SpanNotLiveError):
                self.session.expand(sid)
            return self.expect_unchanged(before)
        if self.model.live[sid]["provenance"] == "observed":
            with pytest.raises(SpanStateError):
                self.session.expand(sid)
            return self.expect_unchanged(before)
        spans = self.session.expand(sid)
        sources = self.model.live[sid]["sources"]
        assert [s.id for s in spans] == list(sources)
        del self.model.live[sid]
        self.model.fate[sid] = "expanded"
        for i in sources:
            original = self.model.content[i]
            assert original["provenance"] == "observed"
            self.model.live[i] = original
            self.model.fate[i] = "live"
        self.record()

    @precondition(lambda self: self.session.position % 7 == 3)
    @rule(bad=st.sampled_from(["", "   ", None, 7, b"bytes"]))
    def bad_text(self, bad):
        before = self.session.position
        with pytest.raises(InvalidInputError):
            self.session.observe(bad)
        self.expect_unchanged(before)

    @rule(label=st.sampled_from(["cycle-1", "cycle-2", "before rewrite"]))
    def mark(self, label):
        position = self.session.mark(label)
        assert self.session.marks()[label] == position
        self.record()

    @precondition(lambda self: self.batch is None)
    @rule()
    def begin_batch(self):
        """Later commands wait in memory until end_batch: every check below must see them."""
        self.batch = self.session.batch()
        self.batch.__enter__()
        self.stored_at_begin = self.ledger.store.head_version(self.session.id)

    @precondition(lambda self: self.batch is not None)
    @rule()
    def end_batch(self):
        assert self.ledger.store.head_version(self.session.id) == self.stored_at_begin  # nothing written yet
        batch, self.batch = self.batch, None
        batch.__exit__(None, None, None)
        assert self.ledger.store.head_version(self.session.id) == self.session.position

    @precondition(lambda self: self.session.position > 1)
    @rule(data=st.data())
    def time_travel(self, data):
        n = data.draw(st.integers(1, self.session.position))
        assert snapshot(self.session.at(n)) == self.history[n]

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def buffer_equals_model(self):
        assert snapshot(self.session) == self.model.buffer()

    @invariant()
    def drift_invariant(self):
        for span in self.session.spans():
            assert span.generation <= 1
            if span.provenance is Provenance.DERIVED:
                assert span.generation == 1
                assert span.sources and all(s.startswith("o") for s in span.sources)
                assert len(span.source_positions) == len(span.sources)
            else:
                assert span.generation == 0 and not span.sources

    @invariant()
    def rebuild_equals_live(self):
        assert self.session.rebuild() == self.session.state

    @invariant()
    def chain_verifies(self):
        result = self.session.verify()
        assert result.ok, result.reason
        assert result.position == self.session.position


LedgerMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLedgerOnMemory = LedgerMachine.TestCase


class SQLiteLedgerMachine(LedgerMachine):
    url = ""

    def __init__(self):
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        type(self).url = f"sqlite:///{self._dir.name}/m.db"
        super().__init__()

    def teardown(self):
        try:
            super().teardown()
        finally:
            self._dir.cleanup()


SQLiteLedgerMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLedgerOnSQLite = SQLiteLedgerMachine.TestCase
