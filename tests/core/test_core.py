"""The core API contract, on every store (memory, a real SQLite file, PostgreSQL)."""

from __future__ import annotations

import io

import pytest

from engine import (
    ConcurrencyError,
    DuplicateSessionError,
    EstimateCounter,
    Expanded,
    InvalidInputError,
    Ledger,
    LedgerError,
    Observed,
    PositionOutOfRangeError,
    Provenance,
    Pruned,
    Rederived,
    RewritePolicyError,
    RewriteRefused,
    Rewritten,
    SessionStarted,
    SpanNotLiveError,
    SpanStateError,
    UnknownSessionError,
    UnknownSpanError,
)


def log_of(session):
    return [(type(e).__name__, e.originator_version, e.prev) for e in session.events()]


def test_observe_returns_spans_with_provenance(ledger):
    s = ledger.create_session("agent-42")
    a = s.observe("billing-api returned 503", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("please fix billing", role="user")
    assert (a.id, b.id) == ("o1", "o2")
    assert a.provenance is Provenance.OBSERVED and a.generation == 0 and a.sources == ()
    assert a.role == "tool" and a.kind == "tool_result" and a.meta == {"tool_call_id": "c1"}
    assert a.tokens > 0 and a.position == 2 and b.position == 3
    assert [sp.id for sp in s.spans()] == ["o1", "o2"]
    assert s.position == 3


def test_rewrite_makes_one_generation_one_span_in_place(ledger):
    s = ledger.create_session("s")
    a, b, c = (s.observe(t) for t in ("one", "two", "three"))
    d = s.rewrite([b.id, c.id], "two and three", by="model-x", reason="compact")
    assert d.id == "d1" and d.provenance is Provenance.DERIVED
    assert d.generation == 1 and d.sources == ("o2", "o3") and d.source_positions == (3, 4)
    assert [sp.id for sp in s.spans()] == ["o1", "d1"]
    ev = list(s.events(s.position))[0]
    assert isinstance(ev, Rewritten) and ev.by == "model-x" and ev.reason == "compact" and not ev.violation


def test_sources_keep_callers_order_and_buffer_order_is_earliest_source(ledger):
    s = ledger.create_session("s")
    spans = [s.observe(f"t{i}") for i in range(5)]
    d = s.rewrite([spans[3].id, spans[1].id], "summary")
    assert d.sources == ("o4", "o2")
    assert [sp.id for sp in s.spans()] == ["o1", "d1", "o3", "o5"]


def test_rewrite_of_a_derived_span_is_refused_and_recorded(ledger):
    s = ledger.create_session("s")
    a, b = s.observe("a 1"), s.observe("b 2")
    d = s.rewrite([a.id, b.id], "a and b")
    before = s.position
    with pytest.raises(RewritePolicyError) as err:
        s.rewrite([d.id], "summary of summary", by="model-x")
    assert "d1" in str(err.value) and err.value.span_id == "d1"
    assert s.position == before + 1
    refused = list(s.events(s.position))[0]
    assert isinstance(refused, RewriteRefused)
    assert refused.inputs == ("d1",) and refused.offending == ("d1",) and refused.text == "summary of summary"
    assert refused.by == "model-x"
    assert [sp.id for sp in s.spans()] == ["d1"]
    assert s.span("d1").text == "a and b"


def test_mixed_rewrite_with_a_derived_input_is_refused(ledger):
    s = ledger.create_session("s")
    a, b, c = s.observe("a"), s.observe("b"), s.observe("c")
    d = s.rewrite([a.id], "A")
    with pytest.raises(RewritePolicyError):
        s.rewrite([d.id, c.id], "A and c")
    assert [sp.id for sp in s.spans()] == ["d1", "o2", "o3"]


def test_rederive_reads_originals_from_the_log(ledger):
    s = ledger.create_session("s")
    a, b = s.observe("error at 14:02 in billing"), s.observe("auth timeout")
    d = s.rewrite([a.id, b.id], "billing failed at 14:05")  # wrong
    seen = []

    def rewriter(originals):
        seen.extend(originals)
        return " / ".join(o.text for o in originals)

    r = s.rederive(d.id, rewriter=rewriter, reason="drift")
    assert [o.text for o in seen] == ["error at 14:02 in billing", "auth timeout"]
    assert all(o.provenance is Provenance.OBSERVED for o in seen)
    assert r.id == "d1" and r.generation == 1 and r.text == "error at 14:02 in billing / auth timeout"
    assert isinstance(list(s.events(s.position))[0], Rederived)
    r2 = s.rederive(d.id, text="billing error 14:02; auth timeout")
    assert r2.generation == 1 and s.span("d1").text == "billing error 14:02; auth timeout"


def test_prune_restore_expand(ledger):
    s = ledger.create_session("s")
    a, b, c = s.observe("a"), s.observe("b"), s.observe("c")
    s.prune(b.id, reason="old tool output")
    assert [sp.id for sp in s.spans()] == ["o1", "o3"]
    restored = s.restore(b.id)
    assert restored.text == "b" and [sp.id for sp in s.spans()] == ["o1", "o2", "o3"]
    d = s.rewrite([a.id, c.id], "a+c")
    s.prune(d.id)
    assert [sp.id for sp in s.spans()] == ["o2"]
    s.restore(d.id)
    assert [sp.id for sp in s.spans()] == ["d1", "o2"]
    originals = s.expand(d.id)
    assert [o.id for o in originals] == ["o1", "o3"]
    assert [sp.id for sp in s.spans()] == ["o1", "o2", "o3"]
    assert all(sp.provenance is Provenance.OBSERVED for sp in s.spans())
    assert isinstance(list(s.events(s.position))[0], Expanded)


def test_restore_of_a_rederived_then_pruned_span_brings_the_new_text(ledger):
    s = ledger.create_session("s")
    a = s.observe("a")
    d = s.rewrite([a.id], "first")
    s.rederive(d.id, text="second")
    s.prune(d.id)
    assert s.restore(d.id).text == "second"


def test_original_reads_the_cold_store(ledger):
    s = ledger.create_session("s")
    a = s.observe("the original text", meta={"k": [1, 2]})
    b = s.observe("other")
    s.rewrite([a.id, b.id], "summary")
    o = s.original("o1")
    assert o.text == "the original text" and o.meta == {"k": [1, 2]} and o.position == 2
    with pytest.raises(SpanStateError):
        s.original("d1")
    with pytest.raises(UnknownSpanError):
        s.original("o3")


def test_original_finds_old_observations_in_a_long_log(ledger):
    s = ledger.create_session("s")
    with s.batch():
        for i in range(300):
            sp = s.observe(f"obs {i}")
            if i % 3:
                s.prune(sp.id)
            if i % 50 == 0:
                s.mark(f"m{i}")
    for k in (1, 2, 77, 150, 299, 300):
        assert s.original(f"o{k}").text == f"obs {k - 1}"


def test_time_travel_returns_the_buffer_as_it_was(ledger):
    s = ledger.create_session("s")
    seen = {}
    a = s.observe("a")
    seen[s.position] = ["o1"]
    b = s.observe("b")
    seen[s.position] = ["o1", "o2"]
    d = s.rewrite([a.id, b.id], "ab")
    seen[s.position] = ["d1"]
    s.prune(d.id)
    seen[s.position] = []
    s.restore(d.id)
    seen[s.position] = ["d1"]
    for n, ids in seen.items():
        view = s.at(n)
        assert [sp.id for sp in view.spans()] == ids and view.position == n
    assert s.at(1).spans() == []
    for bad in (0, s.position + 1, "nope"):
        with pytest.raises(PositionOutOfRangeError):
            s.at(bad)


def test_marks_navigate(ledger):
    s = ledger.create_session("s")
    s.observe("a")
    p = s.mark("cycle-9")
    s.observe("b")
    assert s.at("cycle-9").position == p and len(s.at("cycle-9").spans()) == 1
    assert s.marks() == {"cycle-9": p}


def test_events_are_the_log_in_order(ledger):
    s = ledger.create_session("s")
    s.observe("a")
    s.observe("b")
    s.prune("o1")
    events = list(s.events())
    assert [type(e) for e in events] == [SessionStarted, Observed, Observed, Pruned]
    assert [e.position for e in events] == [1, 2, 3, 4]
    assert [e.position for e in s.events(2, 3)] == [2, 3]
    assert all(e.at is not None for e in events)
    assert events[0].prev == b"" and all(len(e.prev) == 16 for e in events[1:])


def test_reopen_session_and_list_sessions(ledger):
    s = ledger.create_session("agent-1")
    s.observe("x")
    ledger.create_session("agent-2", strict=False)
    again = ledger.session("agent-1")
    assert again.position == s.position and again.spans() == s.spans()
    assert ledger.session(s.id).name == "agent-1"
    infos = {i.name: i for i in ledger.sessions()}
    assert infos["agent-1"].position == 2 and infos["agent-1"].strict
    assert infos["agent-2"].position == 1 and not infos["agent-2"].strict
    assert "agent-1" in ledger and "agent-3" not in ledger


def test_duplicate_and_unknown_sessions(ledger):
    ledger.create_session("a")
    with pytest.raises(DuplicateSessionError):
        ledger.create_session("a")
    with pytest.raises(UnknownSessionError):
        ledger.session("nope")


def test_permissive_session_records_violations(ledger):
    s = ledger.create_session("baseline", strict=False)
    a, b = s.observe("a"), s.observe("b")
    d1 = s.rewrite([a.id], "A")
    c = s.observe("c")
    d2 = s.rewrite([d1.id, c.id], "A and c")
    d3 = s.rewrite([d2.id, b.id], "everything")
    assert d2.generation == 2 and d3.generation == 3
    assert d2.sources == ("o1", "o3") and d3.sources == ("o1", "o3", "o2")
    ev = list(s.events(s.position))[0]
    assert ev.violation and ev.inputs == ("d2", "o2") and ev.generation == 3
    assert s.state.violations == 2
    r = s.rederive(d3.id, rewriter=lambda originals: " ".join(o.text for o in originals))
    assert r.generation == 1 and r.text == "a c b"


def test_strictness_cannot_be_switched_off_later(ledger):
    s = ledger.create_session("s")
    assert s.strict
    with pytest.raises(AttributeError):
        s.strict = False  # noqa
    assert ledger.session("s").strict


def test_two_writers_on_one_session_loser_gets_concurrency_error(ledger):
    s1 = ledger.create_session("shared")
    s1.observe("first")
    s2 = ledger.session("shared")
    s1.observe("from writer 1")
    with pytest.raises(ConcurrencyError):
        s2.observe("from writer 2")
    # the loser reloaded: it sees writer 1's event and can continue
    assert [sp.text for sp in s2.spans()] == ["first", "from writer 1"]
    s2.observe("writer 2 again")
    texts = [e.text for e in s2.events() if isinstance(e, Observed)]
    assert texts == ["first", "from writer 1", "writer 2 again"]
    assert s2.verify().ok


def test_batch_saves_once_and_accepts_everything(ledger):
    s = ledger.create_session("s")
    with s.batch():
        for i in range(50):
            s.observe(f"event {i}")
        s.prune("o3")
        assert ledger.store.head_version(s.id) == 1  # nothing written yet
    assert ledger.store.head_version(s.id) == 52
    assert ledger.session("s").spans() == s.spans()
    assert s.verify().ok


def test_inside_a_batch_the_unsaved_commands_are_part_of_the_log(ledger):
    s = ledger.create_session("s")
    s.observe("stored before the batch")
    with s.batch():
        s.observe("one")
        s.observe("two")
        s.prune("o2")
        assert s.restore("o2").text == "one"  # the prune it undoes is not stored yet
        s.prune("o2")
        assert s.original("o2").text == "one"  # observed and pruned, both unsaved
        assert [type(e).__name__ for e in s.events()] == [
            "SessionStarted", "Observed", "Observed", "Observed", "Pruned", "Restored", "Pruned"
        ]
        assert [e.position for e in s.events(3, 5)] == [3, 4, 5]
        with pytest.raises(SpanNotLiveError, match="pruned at position 7"):
            s.prune("o2")
        assert ledger.store.head_version(s.id) == 2  # still nothing of the batch written
    assert [type(e).__name__ for e in ledger.session("s").events()][-3:] == ["Pruned", "Restored", "Pruned"]
    assert s.verify().ok


def test_restore_and_messages_find_a_span_pruned_long_ago(ledger):
    s = ledger.create_session("s")
    with s.batch():
        s.observe("an early observation that mentions o1 and o12 in its text")
        s.prune("o1", reason="old")
        for i in range(3_000):
            s.observe(f"turn {i} (names o1 in passing)")
    with pytest.raises(SpanNotLiveError, match="pruned at position 3"):
        s.prune("o1")
    assert s.restore("o1").text.startswith("an early observation")
    assert [sp.id for sp in s.spans()][0] == "o1"  # back in its place


def test_batch_keeps_refusal_when_block_raises(ledger):
    s = ledger.create_session("s")
    a = s.observe("a")
    with pytest.raises(RewritePolicyError):
        with s.batch():
            d = s.rewrite([a.id], "A")
            s.rewrite([d.id], "AA")
    reopened = ledger.session("s")
    assert [type(e).__name__ for e in reopened.events()][-2:] == ["Rewritten", "RewriteRefused"]


def test_export_import_round_trip(ledger, tmp_path):
    s = ledger.create_session("exp")
    a = s.observe("a ü 🚀", meta={"n": 1.5, "l": [1, "x", None]})
    b = s.observe("b")
    d = s.rewrite([a.id, b.id], "ab")
    with pytest.raises(RewritePolicyError):
        s.rewrite([d.id], "x")
    s.mark("m")
    path = tmp_path / "exp.jsonl"
    assert s.export(path) == s.position
    other = Ledger.open("memory://", token_counter=EstimateCounter())
    t = other.import_(path)
    assert t.position == s.position and t.spans() == s.spans() and t.verify().ok
    assert [(type(e), e.prev) for e in t.events()] == [(type(e), e.prev) for e in s.events()]
    assert t.verify().head == s.verify().head
    buf = io.StringIO()
    s.export(buf)
    assert buf.getvalue().splitlines() == s.export()


def test_fork_shares_history(ledger):
    s = ledger.create_session("parent")
    a, b = s.observe("a"), s.observe("b")
    s.rewrite([a.id, b.id], "ab")
    f = ledger.fork(s, at=3, name="child")
    assert f.position == 4 and [sp.id for sp in f.spans()] == ["o1", "o2"]
    f.observe("c")
    assert [sp.id for sp in f.spans()] == ["o1", "o2", "o3"]
    assert [sp.id for sp in s.spans()] == ["d1"]
    assert f.at(3).spans() == s.at(3).spans()
    assert f.verify().ok and ledger.session("child").spans() == f.spans()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.observe(""),
        lambda s: s.observe(None),
        lambda s: s.observe(42),
        lambda s: s.observe("x", role="robot"),
        lambda s: s.observe("x", kind="summary"),
        lambda s: s.observe("x", meta=["not", "a", "dict"]),
        lambda s: s.observe("x", meta={"f": object()}),
        lambda s: s.observe("x", role="tool", kind="tool_result"),
        lambda s: s.observe("x", role="assistant", kind="tool_call", meta={"tool_call_id": "c1"}),
        lambda s: s.observe("bad \ud800 surrogate"),
        lambda s: s.observe("x", tokens=-1),
        lambda s: s.rewrite([], "x"),
        lambda s: s.rewrite(["o1", "o1"], "x"),
        lambda s: s.rewrite(["o1"], ""),
        lambda s: s.rewrite([1], "x"),
        lambda s: s.rewrite(["o9"], "x"),
        lambda s: s.rewrite(["o2"], "x"),  # pruned
        lambda s: s.rewrite(["zz"], "x"),
        lambda s: s.prune("o2"),  # already pruned
        lambda s: s.prune("o77"),
        lambda s: s.restore("o1"),  # live
        lambda s: s.rederive("o1", text="x"),  # observed
        lambda s: s.rederive("d1"),  # neither text nor rewriter
        lambda s: s.rederive("d1", text="x", rewriter=lambda o: "y"),
        lambda s: s.rederive("d1", rewriter=lambda o: ""),
        lambda s: s.rederive("d1", rewriter=lambda o: 1 / 0),
        lambda s: s.expand("o1"),
        lambda s: s.mark(""),
        lambda s: s.mark("a\nb"),
        lambda s: s.at(0),
        lambda s: s.at(10_000),
        lambda s: s.original("d1"),
        lambda s: s.original("o99"),
    ],
)
def test_bad_input_is_refused_with_a_typed_error_and_the_log_unchanged(ledger, call):
    s = ledger.create_session("s")
    s.observe("one")
    s.observe("two")
    s.prune("o2")
    s.observe("three")
    s.rewrite(["o3"], "THREE")
    before = log_of(s)
    with pytest.raises(LedgerError) as err:
        call(s)
    assert err.value.message
    assert log_of(s) == before
    assert log_of(ledger.session("s")) == before


def test_unknown_span_error_messages_name_the_span(ledger):
    s = ledger.create_session("s")
    s.observe("a")
    s.prune("o1")
    with pytest.raises(SpanNotLiveError, match=r"o1 is not live .*pruned at position 3"):
        s.rewrite(["o1"], "x")
    with pytest.raises(UnknownSpanError, match="o5 does not exist"):
        s.prune("o5")


def test_invalid_input_for_sessions(ledger):
    for bad in ("", None, "x" * 500, "tab\tname"):
        with pytest.raises(InvalidInputError):
            ledger.create_session(bad)
    assert ledger.sessions() == []


def test_an_atomic_batch_that_raises_writes_nothing():
    """``batch(atomic=True)`` is all or nothing: an exception (an interrupted import's Ctrl-C) leaves
    the log as it was, and the session usable."""
    from engine import EstimateCounter

    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("atomic")
    s.observe("kept")
    with pytest.raises(KeyboardInterrupt):
        with s.batch(atomic=True):
            s.observe("never written")
            s.mark("never")
            raise KeyboardInterrupt
    assert s.position == 2 and [sp.text for sp in s.spans()] == ["kept"]
    assert led.session("atomic").position == 2
    with pytest.raises(KeyboardInterrupt):
        with s.batch():  # the default keeps what was accepted
            s.observe("written")
            raise KeyboardInterrupt
    assert led.session("atomic").position == 3
