"""Replay under another policy (a what-if) and forks that share history, in Python and on the CLI."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from engine import (
    Compactor,
    DuplicateSessionError,
    EstimateCounter,
    InvalidInputError,
    Ledger,
    PositionOutOfRangeError,
    UnknownSessionError,
    policy,
    replay,
)
from engine.cli import main
from engine.events import Marked, Observed, Rewritten, SessionStarted
from test_compaction import build, cycle


def naive_session(ledger, name=None, cycles=24):
    """A permissive session compacted the way that drifts: each summary summarizes the last one."""
    s = build(ledger, cycles=cycles, name=name or "naive-" + uuid.uuid4().hex[:6], strict=False)
    s.mark("cycle-9")
    summary = s.rewrite([f"o{i}" for i in range(2, 20)], "turns 0-4: the API failure")
    summary = s.rewrite([summary.id] + [f"o{i}" for i in range(20, 40)], "the API failure; the migration completed at 14:02")
    assert summary.generation == 2 and s.state.violations == 1
    return s


def observations(s, stop=None):
    return [(ev.text, ev.role, ev.kind, ev.tokens) for ev in s.events(1, stop) if isinstance(ev, Observed)]


# -- replay -------------------------------------------------------------------------------------------


def test_replay_reruns_observations_under_the_guarded_policy(ledger):
    source = naive_session(ledger)
    c = policy("guarded", budget=4_000, keep_last_turns=4)
    target = replay(ledger, source, c, into=source.name + "-guarded")
    assert observations(target) == observations(source)
    assert target.state.violations == 0 and target.state.refusals == 0
    assert max(sp.generation for sp in target.spans()) <= 1
    assert target.tokens <= c.high_water_tokens
    assert any(ev.by.startswith("compactor:") for ev in target.events())
    for ev in target.events():
        if ev.by.startswith("compactor:"):
            assert ev.reason.startswith("trigger: ")
        if isinstance(ev, Rewritten):
            assert all(i.startswith("o") for i in ev.inputs)
    started = target.event(1)
    assert isinstance(started, SessionStarted) and source.name in started.reason and "guarded" in started.reason
    # marks come along, so both sessions can be compared at the same point of the story
    assert "cycle-9" in target.marks()
    mark_ev = target.event(target.marks()["cycle-9"])
    assert isinstance(mark_ev, Marked)
    assert ledger.session(target.name).verify().ok


def test_replay_up_to_a_position(mem_ledger):
    source = naive_session(mem_ledger)
    stop = source.marks()["cycle-9"]
    target = replay(mem_ledger, source.name, policy("elide-only", budget=100_000), into="partial")
    assert observations(target) == observations(source)
    target2 = replay(mem_ledger, source, policy("elide-only", budget=100_000), into="partial-2", stop=stop)
    assert observations(target2) == observations(source, stop)
    assert target2.tokens == source.view(stop).tokens  # nothing was compacted under a big budget


def test_replay_refuses_bad_input_and_writes_nothing(mem_ledger):
    source = naive_session(mem_ledger)
    existing = mem_ledger.create_session("taken")
    with pytest.raises(DuplicateSessionError):
        replay(mem_ledger, source, policy(), into="taken")
    assert existing.refresh().position == 1
    with pytest.raises(InvalidInputError):
        replay(mem_ledger, source, "guarded", into="new-1")
    assert "new-1" not in mem_ledger
    with pytest.raises(UnknownSessionError):
        replay(mem_ledger, "no-such-session", policy(), into="new-2")
    with pytest.raises(PositionOutOfRangeError):
        replay(mem_ledger, source, policy(), into="new-3", stop=10_000)
    assert "new-2" not in mem_ledger and "new-3" not in mem_ledger


# -- fork ------------------------------------------------------------------------------------------------


def test_fork_starts_from_the_buffer_at_n_and_shares_history(ledger):
    parent = build(ledger, cycles=6)
    n = 13
    then = parent.view(n)
    fork = ledger.fork(parent, at=n, name="fork-" + uuid.uuid4().hex[:6])
    assert fork.position == n + 1
    assert [sp.id for sp in fork.spans()] == [sp.id for sp in then.spans()] and fork.tokens == then.tokens
    assert [ev.originator_version for ev in fork.events(1, n)] == list(range(1, n + 1))
    assert [ev.text for ev in fork.events(1, n) if isinstance(ev, Observed)] == [
        ev.text for ev in parent.events(1, n) if isinstance(ev, Observed)
    ]
    started = fork.event(n + 1)
    assert isinstance(started, SessionStarted) and started.forked_from == parent.id and started.fork_position == n
    assert fork.render("openai") == parent.render("openai", at=n)
    # the fork and the parent go on independently
    parent_position = parent.position
    fork.observe("only in the fork")
    fork.prune("o2")
    assert parent.refresh().position == parent_position and "o2" in parent.state.live
    assert fork.original("o2").text == parent.original("o2").text  # read through the shared history
    assert fork.restore("o2").id == "o2"
    reopened = ledger.session(fork.name)
    assert reopened.position == fork.position and reopened.tokens == fork.tokens
    assert reopened.verify().ok


def test_fork_of_a_fork_at_a_mark_and_compaction_in_the_fork(mem_ledger):
    parent = build(mem_ledger, cycles=10)
    parent.mark("before")
    first = mem_ledger.fork(parent, at="before", name="f1")
    cycle(first, 99)
    second = mem_ledger.fork(first, at=first.position, name="f2")
    assert [sp.id for sp in second.spans()] == [sp.id for sp in first.spans()]
    result = Compactor(budget=3_000, keep_last_turns=2).step(second)
    assert result.compacted and second.verify().ok
    assert first.refresh().tokens > second.tokens


def test_fork_bad_input_writes_nothing(mem_ledger):
    parent = build(mem_ledger, cycles=2)
    before = parent.position
    with pytest.raises(PositionOutOfRangeError):
        mem_ledger.fork(parent, at=before + 5, name="nope")
    with pytest.raises(PositionOutOfRangeError):
        mem_ledger.fork(parent, at="no-such-mark", name="nope")
    mem_ledger.fork(parent, at=3, name="yes")
    with pytest.raises(DuplicateSessionError):
        mem_ledger.fork(parent, at=3, name="yes")
    assert "nope" not in mem_ledger and parent.refresh().position == before


# -- CLI ---------------------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        naive_session(led, name="naive")
    return url


def run(db, *args):
    return CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False)


def test_cli_compact_plan_writes_nothing_then_compact_does(db):
    before = json.loads(run(db, "show", "naive", "--json").output)["position"]
    plan = run(db, "compact", "naive", "--plan", "--budget", "3000", "--keep-turns", "4")
    assert plan.exit_code == 0, plan.output
    assert "trigger: " in plan.output and "elide-tool-outputs" in plan.output
    assert json.loads(run(db, "show", "naive", "--json").output)["position"] == before
    done = run(db, "compact", "naive", "--budget", "3000", "--keep-turns", "4", "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert result["position_before"] == before and result["position_after"] == before + len(result["actions"])
    assert result["tokens_after"] < result["tokens_before"]


def test_cli_replay_compares_side_by_side(db):
    out = run(db, "replay", "naive", "--into", "whatif", "--budget", "4000", "--keep-turns", "4")
    assert out.exit_code == 0, out.output
    assert "under policy 'guarded' into 'whatif'" in out.output
    rows = {line.split()[0]: line.split()[1:] for line in out.output.splitlines()[2:] if line.startswith("  ") and len(line.split()) == 3}
    assert rows["violations"] == ["1", "0"]
    assert rows["max_generation"][0] == "2" and int(rows["max_generation"][1]) <= 1
    assert int(rows["live_tokens"][1].replace(",", "")) <= 2_800 < int(rows["live_tokens"][0].replace(",", ""))
    again = run(db, "replay", "naive", "--into", "whatif-2", "--policy", "prune-only", "--budget", "4000", "--json")
    data = json.loads(again.output)
    assert data["replay"]["rewrites"] == 0 and data["replay"]["prunes"] > 0 and data["policy"] == "prune-only"


def test_cli_errors_have_exit_codes(db):
    missing = CliRunner().invoke(main, ["--db", db, "compact", "no-such"])
    assert missing.exit_code == 2 and "no session named" in missing.output
    dup = CliRunner().invoke(main, ["--db", db, "replay", "naive", "--into", "naive"])
    assert dup.exit_code == 2 and "already exists" in dup.output
    bad = CliRunner().invoke(main, ["--db", db, "compact", "naive", "--low", "0.9"])
    assert bad.exit_code == 2 and "low_water" in bad.output
    no_model = CliRunner().invoke(main, ["--db", db, "compact", "naive", "--rewriter", "openai"])
    assert no_model.exit_code == 2 and "--model" in no_model.output
