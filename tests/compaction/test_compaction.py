"""Compaction policies: budget triggers, strategies in order, protected turns, tool pairs kept whole,
never a summary of a summary, every decision an event with its reason, cheap steps."""

from __future__ import annotations

import uuid

import pytest

from engine import (
    Compactor,
    ElideToolOutputs,
    ExtractiveRewriter,
    InvalidInputError,
    PruneDerived,
    PruneOldest,
    RewriteOldest,
    RewriterError,
    ShrinkDerived,
    policy,
)
from engine.events import Pruned, Rederived, RewriteRefused, Rewritten

FILLER = "The request was retried and logged by the gateway without further detail. "


def cycle(s, i, result_tokens=400):
    s.observe(f"Turn {i}: check billing-api health; incident INC-{1000 + i}.", role="user")
    s.observe(f"Checking service svc-{i} now.", role="assistant")
    s.observe(
        f"get_logs svc-{i}",
        role="assistant",
        kind="tool_call",
        meta={"tool_call_id": f"c{i}", "name": "get_logs", "arguments": {"service": f"svc-{i}"}},
    )
    s.observe(
        f"GET /health -> 503 from svc-{i} at 14:{i % 60:02d}. " + FILLER * (result_tokens // 18),
        role="tool",
        kind="tool_result",
        meta={"tool_call_id": f"c{i}"},
    )


def build(ledger, cycles=30, name=None, strict=True):
    s = ledger.create_session(name or "c-" + uuid.uuid4().hex[:8], strict=strict)
    s.observe("You are an SRE agent. Never invent timestamps.", role="system")
    with s.batch():
        for i in range(cycles):
            cycle(s, i)
    return s


def test_no_trigger_below_high_water_writes_nothing(mem_ledger):
    s = build(mem_ledger, cycles=3)
    c = Compactor(budget=100_000)
    plan = c.plan(s)
    assert not plan.triggered and plan.actions == ()
    before = s.position
    result = c.step(s)
    assert not result.compacted and s.position == before


def test_plan_writes_nothing_and_step_does_what_it_planned(ledger):
    s = build(ledger, cycles=30)
    c = Compactor(budget=12_000, keep_last_turns=4)
    before = s.position
    plan = c.plan(s)
    assert plan.triggered and plan.actions
    assert plan.triggers[0].startswith(f"{s.tokens:,} live tokens > high-water 8,400 (70% of 12,000)")
    assert s.position == before
    result = c.step(s)
    assert [(a.command, a.span_ids) for a in result.actions] == [(a.command, a.span_ids) for a in plan.actions]
    assert result.position_after == before + len(plan.actions)
    assert s.tokens <= c.low_water_tokens < result.tokens_before
    # every command is an event naming its trigger and strategy
    for ev in s.events(before + 1):
        assert ev.by.startswith("compactor:")
        assert ev.reason.startswith("trigger: ") and "; strategy: " + ev.by.split(":", 1)[1] in ev.reason
    # reopened from the store, the buffer is the same
    assert ledger.session(s.name).tokens == s.tokens


def test_system_prompt_and_last_turns_are_untouched(mem_ledger):
    s = build(mem_ledger, cycles=40)
    keep = 6
    c = Compactor(budget=6_000, low_water=0.2, high_water=0.3, keep_last_turns=keep)
    protected_before = {sp.id: sp.text for sp in s.spans()[-keep * 2 :]}  # 2 turn starts per cycle
    c.step(s)
    live = s.state.live
    assert "o1" in live and live["o1"].text.startswith("You are an SRE agent")
    for sid, text in protected_before.items():
        assert sid in live and live[sid].text == text


def test_elision_prunes_old_outputs_and_render_keeps_the_pair(mem_ledger):
    s = build(mem_ledger, cycles=20)
    c = Compactor(budget=9_000, keep_last_turns=4, strategies=[ElideToolOutputs(older_than_turns=4)])
    result = c.step(s)
    assert result.actions and all(a.command == "prune" for a in result.actions)
    for a in result.actions:
        ev = s.original(a.span_ids[0])
        assert ev.kind == "tool_result"
    first = result.actions[0].span_ids[0]
    msgs = s.render("openai")
    placeholder = next(m for m in msgs if m["role"] == "tool" and first in m["content"])
    assert placeholder["content"] == f"[tool output pruned: {s.original(first).tokens:,} tokens; restore {first}]"


def test_rewrite_oldest_keeps_tool_pairs_whole_and_only_reads_observed(mem_ledger):
    s = build(mem_ledger, cycles=30)
    c = Compactor(
        budget=8_000,
        keep_last_turns=4,
        strategies=[RewriteOldest(ExtractiveRewriter(), summary_tokens=200, max_input_tokens=1_500)],
    )
    result = c.step(s)
    rewrites = [a for a in result.actions if a.command == "rewrite"]
    assert rewrites
    for a in rewrites:
        ev = s.event(a.position)
        assert isinstance(ev, Rewritten) and ev.generation == 1 and not ev.violation
        assert all(i.startswith("o") for i in ev.inputs)
        spans = [s.original(i) for i in ev.inputs]
        calls = {sp.meta["tool_call_id"] for sp in spans if sp.kind == "tool_call"}
        results = {sp.meta["tool_call_id"] for sp in spans if sp.kind == "tool_result"}
        assert calls <= results, f"{a.span_ids} splits a tool pair"
        # the extractive summary only holds sentences of its sources
        for line in ev.text.splitlines()[1:]:
            sid, sentence = line[2:].split(": ", 1)
            assert sid in ev.inputs and sentence.rstrip(" …") in " ".join(s.original(sid).text.split())


def test_repeated_steps_never_summarize_a_summary(ledger):
    s = ledger.create_session("grow-" + uuid.uuid4().hex[:6])
    s.observe("You are an SRE agent.", role="system")
    rewriter = ExtractiveRewriter()
    c = Compactor(
        budget=1_200,
        keep_last_turns=4,
        strategies=[
            ElideToolOutputs(older_than_turns=4),
            RewriteOldest(rewriter, summary_tokens=100),
            ShrinkDerived(150, rewriter=rewriter),
            PruneDerived(),
        ],
    )
    steps = 0
    with s.batch():
        for i in range(80):
            cycle(s, i, result_tokens=150)
            steps += c.step(s).compacted
    assert steps >= 3
    assert s.state.refusals == 0 and s.state.violations == 0
    assert max(sp.generation for sp in s.spans()) == 1
    rewritten = [ev for ev in s.events() if isinstance(ev, Rewritten)]
    assert len(rewritten) >= 2
    assert any(isinstance(ev, Pruned) and ev.span_id.startswith("d") for ev in s.events())
    assert all(i.startswith("o") for ev in rewritten for i in ev.inputs)
    assert not any(isinstance(ev, RewriteRefused) for ev in s.events())


def test_oversized_summary_is_rederived_from_its_originals(mem_ledger):
    s = build(mem_ledger, cycles=6)
    big = s.rewrite(["o2", "o3", "o4", "o5"], "made-up long summary. " * 200)
    assert big.tokens > 500
    c = Compactor(budget=1_000_000, strategies=[ShrinkDerived(500, rewriter=ExtractiveRewriter())])
    plan = c.plan(s)
    assert plan.triggers == (f"{big.id} has {big.tokens:,} tokens > max derived 500",)
    result = c.step(s)
    (a,) = result.actions
    ev = s.event(a.position)
    assert isinstance(ev, Rederived) and ev.span_id == big.id and ev.sources == ("o2", "o3", "o4", "o5")
    assert "made-up" not in ev.text and "INC-1000" in ev.text
    assert s.span(big.id).tokens <= 500 and ev.by == "compactor:shrink-derived"
    assert ev.reason.startswith(f"trigger: {big.id} has ")


def test_rederive_that_stays_too_large_prunes_instead(mem_ledger):
    s = build(mem_ledger, cycles=3)
    big = s.rewrite(["o2", "o3"], "long " * 800)
    c = Compactor(budget=1_000_000, strategies=[ShrinkDerived(300, rewriter=lambda spans: "wordy " * 500)])
    (a,) = c.step(s).actions
    ev = s.event(a.position)
    assert a.command == "prune" and isinstance(ev, Pruned) and ev.span_id == big.id
    assert "still had" in ev.reason and big.id not in s.state.live


def test_oversized_summary_is_pruned_without_a_rewriter(mem_ledger):
    s = build(mem_ledger, cycles=3)
    big = s.rewrite(["o2", "o3"], "long " * 800)
    c = Compactor(budget=1_000_000, strategies=[ShrinkDerived(300, prune=True)])
    (a,) = c.step(s).actions
    assert a.command == "prune" and isinstance(s.event(a.position), Pruned) and big.id not in s.state.live


def test_prune_derived_is_a_last_resort_under_the_budget(mem_ledger):
    s = build(mem_ledger, cycles=10)
    d = s.rewrite([f"o{i}" for i in range(2, 30)], "summary " * 300)
    c = Compactor(budget=2_000, low_water=0.5, keep_last_turns=2, strategies=[PruneDerived()])
    result = c.step(s)
    assert [a.span_ids for a in result.actions] == [(d.id,)]


def test_prune_oldest_prunes_tool_pairs_as_units(mem_ledger):
    s = build(mem_ledger, cycles=12)
    c = Compactor(budget=5_000, keep_last_turns=2, strategies=[PruneOldest()])
    result = c.step(s)
    pruned = [a.span_ids[0] for a in result.actions]
    calls = [sid for sid in pruned if s.original(sid).kind == "tool_call"]
    assert calls
    for sid in calls:  # in build(), a call's result is the next observation
        assert f"o{int(sid[1:]) + 1}" in pruned
    assert "o1" not in pruned and s.tokens <= c.low_water_tokens


def test_rewriter_failure_leaves_the_log_unchanged(ledger):
    s = build(ledger, cycles=20)

    def broken(spans):
        raise TimeoutError("model timed out")

    c = Compactor(
        budget=2_000, keep_last_turns=4, strategies=[ElideToolOutputs(4), RewriteOldest(broken, summary_tokens=50)]
    )
    assert [a.command for a in c.plan(s).actions][-2:] == ["prune", "rewrite"]
    before = (s.position, s.tokens, [ev.originator_version for ev in s.events()])
    with pytest.raises(RewriterError, match="TimeoutError: model timed out"):
        c.step(s)
    assert (s.position, s.tokens, [ev.originator_version for ev in s.events()]) == before
    assert ledger.session(s.name).position == before[0]

    c = Compactor(budget=8_000, keep_last_turns=4, strategies=[RewriteOldest(lambda spans: "   ", summary_tokens=50)])
    with pytest.raises(RewriterError, match="empty"):
        c.step(s)
    assert s.position == before[0]


def test_gate_refuses_an_invented_fact_and_records_it(mem_ledger):
    from engine import GroundingError

    s = build(mem_ledger, cycles=20)

    def inventive(spans):
        return "All checks passed; the migration completed at 23:59."

    c = Compactor(
        budget=2_000,
        keep_last_turns=4,
        strategies=[ElideToolOutputs(4), RewriteOldest(inventive, summary_tokens=50)],
        gate=True,
    )
    plan = c.plan(s)
    before = s.position
    with pytest.raises(GroundingError):
        c.step(s)
    refused = s.event(s.position)
    assert isinstance(refused, RewriteRefused) and refused.by == "compactor:rewrite-oldest" and refused.findings
    prunes = [a for a in plan.actions if a.command == "prune"]
    assert s.position == before + len(prunes) + 1  # the prunes before it stand, then the refusal
    assert s.state.n_der == 0


def test_a_step_does_not_scan_the_log(mem_ledger, monkeypatch):
    s = build(mem_ledger, cycles=30)
    s.rewrite(["o2", "o3", "o4", "o5"], "x " * 3000)

    def no_scan(*a, **k):
        raise AssertionError("the compactor scanned the log")

    monkeypatch.setattr(mem_ledger.store, "iter_events", no_scan)
    monkeypatch.setattr(mem_ledger.store, "iter_events_desc", no_scan)
    c = Compactor(
        budget=3_000,
        keep_last_turns=4,
        strategies=[ElideToolOutputs(4), RewriteOldest(summary_tokens=50), ShrinkDerived(500, rewriter=ExtractiveRewriter())],
    )
    result = c.step(s)
    assert {a.strategy for a in result.actions} == {"elide-tool-outputs", "rewrite-oldest", "shrink-derived"}


def test_permissive_sessions_get_no_violations_from_the_compactor(mem_ledger):
    s = build(mem_ledger, cycles=10, strict=False)
    s.rewrite(["o2", "o3"], "turn 0 summary")
    c = Compactor(budget=1_500, keep_last_turns=4, strategies=[ElideToolOutputs(4), RewriteOldest(summary_tokens=50)])
    for i in range(10, 40):
        cycle(s, i)
        c.step(s)
    rewrites = [ev for ev in s.events() if isinstance(ev, Rewritten) and ev.by == "compactor:rewrite-oldest"]
    assert len(rewrites) >= 2
    assert s.state.violations == 0 and max(sp.generation for sp in s.spans()) == 1


def test_note_when_the_target_cannot_be_reached(mem_ledger):
    s = build(mem_ledger, cycles=4)
    plan = Compactor(budget=1_000, keep_last_turns=20).plan(s)
    assert plan.triggered and plan.actions == () and "stay above low-water" in plan.note


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget": 0},
        {"budget": True},
        {"high_water": 1.5},
        {"low_water": 0.8, "high_water": 0.7},
        {"keep_last_turns": -1},
        {"strategies": ["not a strategy"]},
        {"gate": "yes"},
    ],
)
def test_bad_compactor_settings_are_typed_errors(kwargs):
    with pytest.raises(InvalidInputError):
        Compactor(**kwargs)


def test_bad_strategy_and_policy_settings_are_typed_errors(mem_ledger):
    s = build(mem_ledger, cycles=2)
    before = s.position
    with pytest.raises(InvalidInputError):
        policy("naive")
    with pytest.raises(InvalidInputError):
        ShrinkDerived(100, target_tokens=200)
    with pytest.raises(InvalidInputError):
        ElideToolOutputs(older_than_turns=-2)
    with pytest.raises(InvalidInputError):
        RewriteOldest(summary_tokens=0)
    assert s.position == before
