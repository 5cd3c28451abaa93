"""The fourth policy of the drift study: the model edits its own buffer through the context tools.

The simulated model is nudged by the agent loop (engine.agent) above the high-water mark and answers
with context_* calls that run through ContextTools.call; it tries to summarize its own summaries,
the ledger refuses (recorded), and it re-derives or prunes instead. Every number of the run is
checked against the log it wrote. Then ``ctxledger demo --model`` against a scripted model server on
127.0.0.1: a real model as summarizer and editor."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from fake_model_server import FakeModelServer, anthropic_reply, openai_reply
from provider_rules import check_anthropic, check_openai

from engine import Ledger, Observed, Pruned, Rederived, RewriteRefused, Rewritten
from engine.agent import NUDGE_META
from engine.cli import main
from engine.demo.study import RealModel, StudyConfig, run_study
from engine.demo.workload import generate
from projections.grounding import gate_findings

CFG = StudyConfig(cycles=20)
VIA = re.compile(r"\[via (o\d+)\]")


@pytest.fixture(scope="module")
def run():
    ledger = Ledger.open("memory://")
    wl = generate(CFG.seed, CFG.cycles, scale=CFG.scale)
    result = run_study(ledger, CFG, workload=wl, policies=("guarded", "model-driven"))
    r = result.runs["model-driven"]
    yield ledger.session(r.session), r, result
    ledger.close()


def test_the_model_is_nudged_and_edits_through_the_tools(run):
    s, r, _ = run
    assert s.strict and r.model == "sim-model"
    events = list(s.events())
    nudges = [ev for ev in events if isinstance(ev, Observed) and ev.meta.get("ctxledger") == NUDGE_META]
    assert len(nudges) == r.nudges > 0
    for ev in nudges:  # only above the high-water mark, and it says so
        pct = int(re.search(r"\((\d+)%\)", ev.text).group(1))
        assert pct > 100 * CFG.high_water and f"{CFG.budget:,}" in ev.text
    calls = {ev.span_id: ev for ev in events if isinstance(ev, Observed) and ev.kind == "tool_call" and ev.by == "model:sim-model"}
    assert len(calls) == r.tool_calls and all(ev.meta["name"].startswith("context_") for ev in calls.values())
    results = [ev for ev in events if isinstance(ev, Observed) and ev.kind == "tool_result" and ev.meta.get("name", "").startswith("context_")]
    assert len(results) == r.tool_calls
    assert sum(1 for ev in results if ev.meta.get("is_error")) == r.tool_errors > 0
    # every edit the model made points at the call that made it
    edits = [ev for ev in events if isinstance(ev, (Pruned, Rewritten, Rederived)) and ev.by == "model:sim-model"]
    assert edits
    for ev in edits:
        via = ev.meta.get("tool_call") if isinstance(ev, Rewritten) else VIA.search(ev.reason).group(1)
        call = calls[via]
        assert call.originator_version < ev.originator_version
        wanted = {Rewritten: "context_summarize", Rederived: "context_rederive", Pruned: "context_prune"}[type(ev)]
        assert call.meta["name"] == wanted
    # the run's numbers are the log's
    final = r.final
    assert final.rewrites == sum(isinstance(ev, Rewritten) for ev in edits) > 0
    assert final.rederives == sum(isinstance(ev, Rederived) for ev in edits) > 0
    assert final.prunes == sum(isinstance(ev, Pruned) for ev in events)
    assert final.refused == sum(isinstance(ev, RewriteRefused) for ev in events)


def test_it_tries_to_summarize_its_summaries_is_refused_and_then_rederives_or_prunes(run):
    s, _, _ = run
    events = list(s.events())
    folds = [ev for ev in events if isinstance(ev, RewriteRefused) and ev.offending]
    assert folds, "the simulated model's habit: fold its earlier summaries into a new one"
    for ev in folds:
        assert ev.by == "model:sim-model" and all(i.startswith("d") for i in ev.offending)
        # the model read why: the next observation is the error result naming the two legal moves
        result = next(e for e in events if e.originator_version > ev.originator_version and isinstance(e, Observed))
        assert result.kind == "tool_result" and result.meta.get("is_error")
        assert "context_rederive" in result.text and "context_prune" in result.text
        # ...and before the next nudge it took one of them, or summarized observations only
        later = [e for e in events if e.originator_version > ev.originator_version]
        stop = next((e.originator_version for e in later if isinstance(e, Observed) and e.meta.get("ctxledger") == NUDGE_META), 1 << 60)
        moves = [e for e in later if e.originator_version < stop and e.by == "model:sim-model"
                 and isinstance(e, (Rederived, Pruned, Rewritten))]
        assert moves
        assert all(not (isinstance(e, Rewritten) and any(i.startswith("d") for i in e.inputs)) for e in moves)
    assert any(isinstance(e, Rederived) and e.by == "model:sim-model" for e in events)


def test_generation_never_exceeds_one_and_no_invention_reaches_the_buffer(run):
    s, r, _ = run
    assert all(c.max_generation <= 1 and c.violations == 0 and c.invented == 0 for c in r.cycles)
    assert r.model_inventions > 0  # it did invent: the gate refused those summaries
    assert r.inventions and all(i.event == "RewriteRefused" and not i.in_buffer for i in r.inventions)
    derived = [sp for sp in s.spans() if sp.derived]
    assert derived
    for sp in derived:
        assert gate_findings(sp.text, [o.text for o in s.originals(sp.id)]) == []
    check_openai(s.render("openai"))
    check_anthropic(s.render("anthropic"))


def test_it_stays_under_budget_like_the_other_policies(run):
    _, r, result = run
    assert all(c.live_tokens <= CFG.budget for c in r.cycles)
    assert r.peak_tokens > CFG.high_tokens  # compaction was needed
    g = result.runs["guarded"]
    assert r.cycles[0].live_tokens == g.cycles[0].live_tokens  # same observations, same token counts
    assert r.final.compactions == r.nudges


# -- ctxledger demo --model, against a scripted model server ---------------------------------------------

_FACT = re.compile(r"^(?:\[o\d+\] )?(?:ERROR|STATUS|OK) (.+)$", re.MULTILINE)


class ScriptedProvider:
    """Answers rewriter calls with a grounded summary (fact lines quoted from the prompt) and editor
    calls like a model with the same habit: fold its summaries in first, then prune old tool output."""

    def __init__(self, provider: str):
        self.provider = provider
        self.editor_requests = 0
        self.summary_requests = 0
        self.n = 0

    def __call__(self, path, body):
        if self.provider == "openai":
            assert path == "/v1/chat/completions"
            texts = [m.get("content") or "" for m in body["messages"]]
        else:
            assert path == "/v1/messages"
            texts = [body.get("system", "")] + [
                b.get("text", "") if b.get("type") == "text" else str(b.get("content", ""))
                for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}])
            ]
        if not body.get("tools"):
            self.summary_requests += 1
            facts = _FACT.findall("\n".join(texts))[:4]
            return 200, self.reply("\n".join(f"- {f}" for f in facts) or "Routine output; nothing notable.")
        self.editor_requests += 1
        if self.provider == "openai":
            check_openai(body["messages"])
        else:
            check_anthropic({"system": body.get("system", ""), "messages": body["messages"]})
        everything = "\n".join(texts)
        last = texts[-1]
        derived = re.findall(r"\[(d\d+)\b", everything)
        results = re.findall(r"^\[(o\d+)\] (?:INFO|WARN|step|id \|)", everything, re.MULTILINE)
        if "Context budget" in last and derived:
            return 200, self.call("context_summarize", {"span_ids": [derived[0], results[0]], "summary": "all of it", "reason": "fold"})
        if "Context budget" in last:
            return 200, self.call("context_summarize", {"span_ids": [results[0]], "summary": "Routine output; nothing notable.",
                                                        "reason": "old output in one line"})
        if "refused and recorded" in last or "summarized" in last:
            return 200, self.call("context_prune", {"span_ids": results[:6], "reason": "old tool output"})
        return 200, self.reply("done")

    def reply(self, text):
        return openai_reply(text) if self.provider == "openai" else anthropic_reply(text)

    def call(self, name, args):
        self.n += 1
        if self.provider == "openai":
            return openai_reply(None, [(f"call_{self.n}", name, args)])
        return anthropic_reply(None, [(f"toolu_{self.n}", name, args)])


pytestmark = pytest.mark.usefixtures("no_proxy")  # tests/conftest.py


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cli_demo_with_a_real_model_says_which_model_produced_the_numbers(provider, tmp_path):
    script = ScriptedProvider(provider)
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    with FakeModelServer(script) as srv:
        base = srv.openai_url if provider == "openai" else srv.anthropic_url
        r = CliRunner().invoke(main, ["--db", url, "demo", "--cycles", "4", "--budget", "30000",
                                      "--model", f"{provider}:local-model", "--base-url", base])
    assert not srv.errors, srv.errors
    assert r.exit_code == 0, r.output
    assert f"model: {provider}:local-model at {base}" in r.output
    assert f"Numbers produced by {provider}:local-model at {base}: a real experiment" in r.output
    assert "simulated model" not in r.output
    assert "a real model keeps no book of what it invented" in r.output
    assert script.summary_requests > 0 and script.editor_requests > 0
    with Ledger.open(url) as ledger:
        naive = ledger.session("demo-naive")
        assert any(isinstance(ev, Rewritten) and ev.by == f"naive-summarizer:{provider}:local-model" for ev in naive.events())
        md = list(ledger.session("demo-model-driven").events())
    by = f"model:{provider}:local-model"
    assert any(isinstance(ev, Pruned) and ev.by == by for ev in md)
    folds = [ev for ev in md if isinstance(ev, RewriteRefused) and ev.offending]
    assert folds and all(ev.by == by for ev in folds)
    assert all(not any(i.startswith("d") for i in ev.inputs) for ev in md if isinstance(ev, Rewritten))
    assert any(isinstance(ev, Rewritten) and ev.by == by for ev in md)
    # the report shows the four runs side by side, with the model's own edits counted
    out = tmp_path / "r.html"
    names = ["demo-prune-only", "demo-naive", "demo-guarded", "demo-model-driven"]
    rep = CliRunner().invoke(main, ["--db", url, "report", *names, "-o", str(out)])
    assert rep.exit_code == 0, rep.output
    table = out.read_text().split('<table id="comparison">', 1)[1].split("</table>", 1)[0]
    assert all(f"<th>{n}</th>" in table for n in names)
    model_edits = sum(1 for ev in md if ev.by == by and type(ev).__name__ in ("Pruned", "Rewritten", "Rederived", "RewriteRefused"))
    assert f"<th>edits by the model itself (context tools)</th><td>0</td><td>0</td><td>0</td><td>{model_edits:,}</td>" in table
    five = CliRunner().invoke(main, ["--db", url, "report", *names, "demo-naive", "-o", str(out)])
    assert five.exit_code == 2 and "two to four" in five.output


def test_cli_demo_with_a_real_model_json_names_the_model(tmp_path):
    script = ScriptedProvider("openai")
    with FakeModelServer(script) as srv:
        r = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'd.db'}", "demo", "--cycles", "3", "--budget", "30000",
                                      "--model", "openai:local-model", "--base-url", srv.openai_url, "--json"])
    assert r.exit_code == 0, r.output
    study = json.loads(r.output)["study"]
    assert study["model"] == "openai:local-model" and study["simulated"] is False and study["base_url"] == srv.openai_url
    assert study["runs"]["model-driven"]["model"]["name"] == "openai:local-model"
    assert study["runs"]["model-driven"]["model"]["tool_calls"] > 0


def test_cli_demo_model_options_are_checked(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    runner = CliRunner()
    for args, needle in ((["--base-url", "http://127.0.0.1:1/v1"], "--base-url needs --model"),
                         (["--model", "gpt-4.1"], "openai:NAME"),
                         (["--model", "mistral:large"], "openai:NAME")):
        r = runner.invoke(main, ["--db", url, "demo", "--cycles", "2", *args])
        assert r.exit_code == 2 and needle in r.output, r.output
    with Ledger.open(url) as ledger:
        assert [i.name for i in ledger.sessions()] == []


def test_an_unreachable_model_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'y.db'}", "demo", "--cycles", "3", "--budget", "30000",
                                  "--model", "openai:m", "--base-url", "http://127.0.0.1:1/v1"])
    assert r.exit_code == 2
    assert "openai:m failed" in r.output and "Connection" in r.output


def test_real_model_spec_is_validated():
    with pytest.raises(Exception, match="openai:NAME"):
        RealModel("llama")
    assert RealModel("anthropic:claude-test").name == "anthropic:claude-test"
