"""A real Claude Code session replayed through the proxy as the Anthropic Messages traffic its client
sent, WITHOUT a header (issue 23): the proxy follows the conversation through its compaction, and
its session equals the imported transcript's in spans and compaction — up to the differences named
here, each of which says what the proxy saw that the transcript file does not show, or back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine import Ledger
from engine.cli import main
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import serve
from engine.proxy.testing_traffic import claude_code_requests, real_replay

TRANSCRIPT = Path("/work/shared/data/transcripts/claude_spotter_ae4a77f8_manual.jsonl")
SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."  # not in the transcript: any fixed prompt

pytestmark = pytest.mark.skipif(not TRANSCRIPT.exists(), reason="the shared transcript is not here")


def _norm(span) -> tuple[str, str, str]:
    """A span as both sides can agree on: tool calls by name and arguments (the importer keeps the
    arguments' key order, the proxy sorts them), empty tool results as empty."""
    if span.kind == "tool_call":
        return ("tool_call", span.meta["name"], json.dumps(span.meta.get("arguments"), sort_keys=True))
    if span.kind == "tool_result":
        return ("tool_result", span.meta["tool_call_id"], "" if span.meta.get("empty") else span.text.strip())
    return (span.role, span.kind, span.text.strip())


def _observed(s) -> list:
    return [s.original(e.span_id) for e in s.events() if type(e).__name__ == "Observed"]


def _rewrite(s):
    [rewrite] = [e for e in s.events() if type(e).__name__ == "Rewritten"]
    return rewrite


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    requests, first_after = claude_code_requests(TRANSCRIPT, SYSTEM)
    replies = iter(r["_reply"] for r in requests)

    async def answer(request):
        reply = next(replies)
        return JSONResponse({"id": "msg_replay", "type": "message", "role": "assistant", "model": "claude",
                             "content": reply["content"], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 1, "output_tokens": 1}})

    upstream = Starlette(routes=[Route("/v1/messages", answer, methods=["POST"])])
    proxied = f"sqlite:///{tmp / 'proxy.db'}?synchronous=normal"
    with serve(upstream) as origin, serve(create_app(ProxyConfig(upstream=origin), lambda: Ledger.open(proxied))) as url:
        client = httpx.Client(base_url=url, headers={"x-api-key": "sk-ant-replay", "user-agent": "claude-cli/2.1.39"}, timeout=60)
        for r in requests:
            body = {k: v for k, v in r.items() if k != "_reply"}
            assert client.post("/v1/messages", json=body).status_code == 200
        counts = client.get("/ctxledger/health").json()["counts"]
    imported = f"sqlite:///{tmp / 'import.db'}"
    result = CliRunner().invoke(main, ["--db", imported, "import", str(TRANSCRIPT)])
    assert result.exit_code == 0, result.output
    p, i = Ledger.open(proxied), Ledger.open(imported)
    yield p, i, requests[first_after - 1]["_reply"], counts
    p.close()
    i.close()


def test_one_session_without_a_header_and_its_compaction_recognised(sessions):
    proxy, _, _, counts = sessions
    assert len(proxy.sessions()) == 1
    assert counts["compactions_done"] == 1 and counts["compactions_refused"] == 0


def test_the_proxys_session_equals_the_imported_one_in_spans(sessions):
    proxy, imported, summary_reply, _ = sessions
    ps = proxy.session(proxy.sessions()[0].name)
    iss = imported.session("claude-code:ae4a77f8-aedd-4bc1-888f-c94edc91af04")
    pc, ic = Counter(map(_norm, _observed(ps))), Counter(map(_norm, _observed(iss)))
    summary_text = "\n".join(b["text"] for b in summary_reply["content"] if b.get("type") == "text").strip()
    # the proxy saw the system prompt and the compaction call's reply (the transcript keeps that
    # reply in its sidechain file, imported as a session of its own)
    assert pc - ic == Counter({("system", "message", SYSTEM): 1, ("assistant", "message", summary_text): 1})
    # the importer splits the harness pointer off the summary message; the proxy keeps it in the summary
    only_imported = list((ic - pc).elements())
    assert len(only_imported) == 1 and only_imported[0][2].startswith("If you need specific details")
    assert only_imported[0][2] in _rewrite(ps).text


def test_the_proxys_compaction_equals_the_imported_one_in_sources_and_summary(sessions):
    proxy, imported, summary_reply, _ = sessions
    ps = proxy.session(proxy.sessions()[0].name)
    iss = imported.session("claude-code:ae4a77f8-aedd-4bc1-888f-c94edc91af04")
    p_rewrite, i_rewrite = _rewrite(ps), _rewrite(iss)
    assert p_rewrite.by == "client" and i_rewrite.text in p_rewrite.text  # the same summary
    p_src = Counter(_norm(ps.original(x)) for x in p_rewrite.inputs)
    i_src = Counter(_norm(iss.original(x)) for x in i_rewrite.inputs)
    summary_text = "\n".join(b["text"] for b in summary_reply["content"] if b.get("type") == "text").strip()
    assert p_src - i_src == Counter({("assistant", "message", summary_text): 1})
    # the /compact command's harness rows: the importer counts them before the boundary (their
    # timestamps are earlier); the client sent them after the summary, so they are live in the proxy's
    harness = i_src - p_src
    harness_spans = [iss.original(x) for x in i_rewrite.inputs if _norm(iss.original(x)) in harness]
    assert harness and all(x.meta.get("harness") for x in harness_spans)
    after = {_norm(x) for x in ps.spans() if x.observed}
    assert set(harness) <= after


REAL = sorted(Path(__file__).resolve().parents[2].glob("benchmarks/data/real/spotter-*/*.jsonl"))


@pytest.mark.skipif(len(REAL) < 4, reason="the four real spotter transcripts are not here (git-ignored; see benchmarks/data/real/README.md)")
def test_five_real_sessions_replayed_at_once_each_compaction_recognised_and_none_joined(tmp_path):
    """The five real Claude Code sessions (one developer, one project: the hardest mix) as interleaved
    traffic from ONE client with ONE system prompt and no header: each compaction (four of them
    automatic, the summary alone; one manual, the summary and the /compact rows) is a rewrite of
    its own session, and no session holds two transcripts."""
    pending: dict = {}

    async def answer(request):
        return JSONResponse({"id": "msg_replay", "type": "message", "role": "assistant", "model": "claude",
                             "content": pending["reply"]["content"], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 1, "output_tokens": 1}})

    upstream = Starlette(routes=[Route("/v1/messages", answer, methods=["POST"])])
    db = f"sqlite:///{tmp_path / 'mixed.db'}?synchronous=normal"
    with serve(upstream) as origin, serve(create_app(ProxyConfig(upstream=origin), lambda: Ledger.open(db))) as url:
        out = real_replay([TRANSCRIPT, *REAL], SYSTEM, url, lambda reply: pending.__setitem__("reply", reply),
                          lambda: Ledger.open(db))
        counts = httpx.get(f"{url}/ctxledger/health").json()["counts"]
    assert out.wrong_joins == [] and out.stray == 0
    assert sorted(out.recognised) == sorted(["ae4a77f8", *(p.parent.name.removeprefix("spotter-") for p in REAL)])
    assert out.sessions == 5 and counts["compactions_done"] == 5 and counts["compactions_refused"] == 0
