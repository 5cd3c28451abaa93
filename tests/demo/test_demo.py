"""The drift study's claims, as assertions: the naive run reproduces the seed's story (an invented fact
that survives every later rewrite, pinned by blame to the rewrite that introduced it), the guarded run
keeps invented facts out of the buffer, prune-only never derives anything, and the same seed gives the
same numbers. Plus the ``ctxledger demo`` command itself."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

import pytest
from click.testing import CliRunner

from engine import Ledger, Provenance, RewriteRefused, Rewritten
from engine.cli import main
from engine.demo.simmodel import DriftingModel
from engine.demo.story import needle, tell
from engine.demo.study import POLICIES, StudyConfig, run_study, session_names
from engine.demo.workload import generate
from engine.spans import Span
from projections.grounding import gate_findings

DEFAULT = StudyConfig()  # the study `ctxledger demo` runs: seed 7, 40 cycles, 200k budget


@pytest.fixture(scope="module")
def study():
    """The default study, once, in memory (with the default exact token counter)."""
    ledger = Ledger.open("memory://")
    wl = generate(DEFAULT.seed, DEFAULT.cycles, scale=DEFAULT.scale)
    result = run_study(ledger, DEFAULT, workload=wl)
    yield ledger, result, wl
    ledger.close()


@pytest.fixture(scope="module")
def story(study):
    """The forensic story of the default study (blame and the three audits), once."""
    ledger, result, wl = study
    return tell(ledger, result, wl)


def _numbers(result) -> dict:
    """Everything the study measured, without names and timings."""
    out = {}
    for p, run in result.runs.items():
        out[p] = {
            "cycles": [asdict(c) for c in run.cycles],
            "inventions": [asdict(i) for i in run.inventions],
            "model": (run.model_calls, run.model_drops, run.model_merges, run.model_inventions),
            "summary_tokens": run.summary_tokens_written,
            "peak": run.peak_tokens,
        }
    return out


# -- the workload and the model ---------------------------------------------------------------


def test_workload_is_seeded_and_its_facts_are_stated_verbatim():
    a, b, c = generate(3, 6), generate(3, 6), generate(4, 6)
    assert [t.text for t in a.turns()] == [t.text for t in b.turns()]
    assert [t.text for t in a.turns()] != [t.text for t in c.turns()]
    turns = a.turns()
    for fact in a.facts.values():
        homes = a.homes[fact.id]
        assert homes and all(fact.statement in turns[o - 1].text for o in homes)
    kinds = {f.kind for f in a.facts.values()}
    assert {"api_failure", "migration"} <= kinds
    # distinct failures in different services, each with its own time
    failures = [f for f in a.facts.values() if f.kind == "api_failure"]
    assert len({f.subject for f in failures}) >= 2
    assert all(f.time in a.times for f in failures)


def _span(i: int, text: str, derived: bool = False) -> Span:
    if derived:
        return Span(id=f"d{i}", text=text, role="user", kind="summary", provenance=Provenance.DERIVED,
                    generation=1, sources=("o1",))
    return Span(id=f"o{i}", text=text, role="tool", kind="tool_result", provenance=Provenance.OBSERVED)


def test_the_model_invents_only_what_no_observation_says_and_trusts_its_own_summaries():
    wl = generate(7, 12)
    turns = wl.turns()
    spans = [_span(i, t.text) for i, t in enumerate(turns, 1) if i > 1]
    model = DriftingModel(wl, seed=1, drop=0.0, merge=0.0, invent=1.0)
    first = model.rewrite(spans)
    assert len(model.inventions) == 1
    invented = model.inventions[0]
    assert invented.text in first
    for t in re.findall(r"\b\d{2}:\d{2}\b", invented.text):
        assert t not in wl.times  # provably invented: no observation mentions that time
    # with no errors, every fact it read is in the summary, verbatim
    assert all(f.statement in first for f in wl.facts.values())
    # handed its own summary back, it keeps the invention even when it drops every fact
    again = DriftingModel(wl, seed=2, drop=1.0, merge=0.0, invent=0.0)
    again.ledger = model.ledger
    second = again.rewrite([_span(1, first, derived=True)])
    assert invented.text in second
    assert not any(f.statement in second for f in wl.facts.values())


# -- the study's claims --------------------------------------------------------------------------


def test_naive_run_reproduces_the_seed_story(study):
    ledger, result, wl = study
    naive = result.runs["naive"]
    s = ledger.session(naive.session)
    assert not s.strict
    assert naive.final.violations > 0 and naive.final.max_generation > 1
    inv = naive.headline()
    assert inv is not None, "the default study must show an invented fact that is live at the end"
    assert inv.event == "Rewritten" and inv.in_buffer
    # it survived every later rewrite: each summary-of-a-summary after it states it again
    assert len(inv.later_rewrites) >= 3
    assert inv.survived_every_rewrite
    for position in inv.later_rewrites:
        ev = s.event(position)
        assert isinstance(ev, Rewritten) and ev.violation and inv.text in ev.text
    # ...and no observation ever said it
    for t in re.findall(r"\b\d{2}:\d{2}\b", inv.text):
        assert t not in wl.times
    assert all(inv.text not in turn.text for turn in wl.turns())
    # blame pins it to the rewrite that introduced it
    hits = s.blame(needle(inv))
    live = [h for h in hits if h.live]
    assert live and all(not h.grounded for h in live)
    assert {h.origin_position for h in live} == {inv.position}
    assert isinstance(s.event(inv.position), Rewritten)
    # the fact is measured as present at the end
    assert naive.final.invented >= 1
    # and naive recursive summarization loses more of the ground truth than the guarded policy
    assert naive.final.retention < result.runs["guarded"].final.retention


def test_story_audits_find_the_invented_time_in_the_naive_session(study, story):
    _, result, _ = study
    inv = result.runs["naive"].headline()
    audit = story.audits[result.runs["naive"].session]
    assert not audit["ok"]
    assert audit["kinds"].get("generation-exceeded")
    for t in re.findall(r"\b\d{2}:\d{2}\b", inv.text):
        assert t in audit["unsupported"]
    guarded = story.audits[result.runs["guarded"].session]
    assert guarded["ok"] and guarded["errors"] == 0 and not guarded["unsupported"]
    assert guarded["kinds"].get("rewrite-refused") == result.runs["guarded"].final.refused


def test_guarded_run_keeps_invented_facts_out_of_the_buffer(study):
    ledger, result, _ = study
    guarded = result.runs["guarded"]
    s = ledger.session(guarded.session)
    assert s.strict
    assert all(c.invented == 0 for c in guarded.cycles)
    assert all(c.max_generation <= 1 and c.violations == 0 for c in guarded.cycles)
    assert guarded.final.rewrites > 0 and guarded.final.rederives > 0
    # the model did invent: the gate refused those rewrites, and each refusal is in the log
    assert guarded.model_inventions > 0
    refused = [ev for ev in s.events() if isinstance(ev, RewriteRefused)]
    assert len(refused) == guarded.final.refused > 0
    assert all(ev.findings for ev in refused)
    assert all(ev.by.startswith("compactor:") for ev in refused)  # the real Compactor, with gate=True
    for inv in guarded.inventions:
        assert inv.event == "RewriteRefused" and not inv.in_buffer
    # independent of the model's bookkeeping: every live summary is grounded in its originals
    derived = [sp for sp in s.spans() if sp.derived]
    assert derived
    for sp in derived:
        originals = s.originals(sp.id)
        assert all(o.observed and o.generation == 0 for o in originals)
        assert gate_findings(sp.text, [o.text for o in originals]) == []


def test_prune_only_run_never_derives_anything(study):
    ledger, result, _ = study
    run = result.runs["prune-only"]
    s = ledger.session(run.session)
    assert s.state.n_der == 0
    assert all(c.derived_tokens == 0 and c.rewrites == 0 and c.invented == 0 for c in run.cycles)
    assert run.final.prunes > 0
    assert not any(isinstance(ev, (Rewritten, RewriteRefused)) for ev in s.events())


def test_every_run_stays_under_its_budget_after_compaction(study):
    _, result, _ = study
    cfg = result.config
    for run in result.runs.values():
        assert run.final.compactions > 0
        assert all(c.live_tokens <= cfg.budget for c in run.cycles)
        assert run.peak_tokens > cfg.high_tokens  # compaction was really needed


def test_story_tells_blame_and_audit(study, story):
    _, result, _ = study
    inv = result.runs["naive"].headline()
    assert story.invention == inv
    assert story.blame and story.blame[0]["origin_position"] == inv.position
    assert len(story.refusals) == result.runs["guarded"].final.refused
    assert story.audits[result.runs["prune-only"].session]["ok"]
    text = "\n".join(story.lines())
    assert inv.text in text and f"position {inv.position}" in text


def test_same_seed_same_numbers():
    cfg = StudyConfig(cycles=12, invent=0.4)
    a = run_study(Ledger.open("memory://"), cfg)
    b = run_study(Ledger.open("memory://"), cfg)
    assert _numbers(a) == _numbers(b)
    c = run_study(Ledger.open("memory://"), StudyConfig(cycles=12, invent=0.4, seed=8), policies=("naive",))
    assert _numbers(c)["naive"] != _numbers(a)["naive"]


def test_session_names_get_a_run_number_when_taken():
    ledger = Ledger.open("memory://")
    assert session_names(ledger) == {p: f"demo-{p}" for p in POLICIES}
    ledger.create_session("demo-naive")
    assert session_names(ledger) == {p: f"demo-{p}-2" for p in POLICIES}


def test_study_config_rejects_bad_rates():
    with pytest.raises(ValueError):
        StudyConfig(drop=1.5)
    with pytest.raises(ValueError):
        StudyConfig(cycles=0)


# -- the command -----------------------------------------------------------------------------


def test_cli_demo_prints_the_table_and_reruns_under_new_names(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    runner = CliRunner()
    r = runner.invoke(main, ["--db", url, "demo", "--cycles", "8"])
    assert r.exit_code == 0, r.output
    out = r.output
    for expected in ("at the end", "fact retention", "invented facts in buffer", "prune-only", "naive", "guarded",
                     "demo-naive", "Try next:", "ctxledger --db", "report demo-naive demo-guarded"):
        assert expected in out
    assert "Where the guarded policy costs something" in out
    r2 = runner.invoke(main, ["--db", url, "demo", "--cycles", "8"])
    assert r2.exit_code == 0, r2.output
    assert "demo-naive-2" in r2.output
    with Ledger.open(url) as ledger:
        names = {i.name for i in ledger.sessions()}
    assert {"demo-prune-only", "demo-naive", "demo-guarded", "demo-naive-2"} <= names


def test_cli_demo_json_parses(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    r = CliRunner().invoke(main, ["--db", url, "demo", "--cycles", "9", "--seed", "3", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    runs = data["study"]["runs"]
    assert set(runs) == set(POLICIES)
    for run in runs.values():
        assert len(run["cycles"]) == 9
        assert 0 <= run["final"]["retention"] <= 1
    assert data["study"]["config"]["seed"] == 3
    assert runs["prune-only"]["final"]["rewrites"] == 0
    assert any(cmd.startswith("ctxledger --db") for cmd in data["next"])


def test_cli_demo_rejects_bad_options(tmp_path):
    r = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'x.db'}", "demo", "--drop", "2"])
    assert r.exit_code == 2
    assert "drop" in r.output.lower()


def test_cli_report_writes_a_self_contained_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    runner = CliRunner()
    assert runner.invoke(main, ["--db", url, "demo", "--cycles", "9", "--no-audit"]).exit_code == 0
    with Ledger.open(url) as ledger:
        s = ledger.session("demo-naive")
        s.observe("</script><script>alert('x')</script> & <b>bold</b>", role="user")
    out = tmp_path / "r.html"
    r = runner.invoke(main, ["--db", url, "report", "demo-naive", "demo-guarded", "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.startswith("<!doctype html>")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""<(?:link|img|iframe)\b|\bsrc=|@import|url\(""", page)
    assert "<script>alert" not in page  # log text cannot break out of the data element
    assert 'id="comparison"' in page and "demo-guarded" in page
    one = runner.invoke(main, ["--db", url, "report", "demo-guarded", "-o", str(tmp_path / "one.html")])
    assert one.exit_code == 0 and 'id="comparison"' not in (tmp_path / "one.html").read_text()
    with Ledger.open(url) as ledger:
        mark = ledger.session("demo-guarded").marks()["cycle-8"]
    past = runner.invoke(main, ["--db", url, "report", "demo-guarded", "--at", "cycle-8", "-o", str(tmp_path / "at.html")])
    assert past.exit_code == 0, past.output
    assert f"{mark:,} events" in (tmp_path / "at.html").read_text()
    bad = runner.invoke(main, ["--db", url, "report", "no-such-session", "-o", str(tmp_path / "x.html")])
    assert bad.exit_code == 2 and "no-such-session" in bad.output


def test_the_demo_page_shows_the_real_tables_of_the_default_study(study):
    """docs/demo.md shows the real output: its tables are what the default study prints now."""
    from pathlib import Path

    from engine.cli.demo import _per_cycle, _plain_table, _rows

    page = (Path(__file__).resolve().parents[2] / "docs" / "demo.md").read_text(encoding="utf-8")
    section = page.split("<!-- section:demo", 1)[1].split("<!-- /section:demo -->", 1)[0]
    _, result, _ = study
    header, per = _per_cycle(result, 4)
    rows = [[label, *cells] for label, cells in _rows(result)]
    end = [line for line in _plain_table([""] + list(result.runs), rows)[2:] if not line.startswith("session ")]
    expected = _plain_table(header, per) + end
    missing = [line for line in expected if line not in section]
    assert not missing, "docs/demo.md's demo output is stale; rerun `ctxledger demo` and paste it:\n" + "\n".join(missing)
    inv = result.runs["naive"].headline()
    assert f'"{inv.text}"' in section and f"position {inv.position}" in section
