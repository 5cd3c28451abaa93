"""The MCP server (engine/integrations/mcp.py, ``ctxledger mcp``): in process with ``mcp.Client(server)``
and over a real stdio subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger, Observed, Pruned, RewriteRefused
from engine.cli import main
from engine.tools import TOOL_NAMES, ContextTools

import mcp  # noqa: E402  (the [mcp] extra: installed by the test command)

from engine.integrations.mcp import BUFFER_URI, FORENSIC_TOOLS, create_server  # noqa: E402


def _fill(s):
    s.observe("You are the release agent.", role="system")  # o1
    s.observe("Ship version 3.2 to production.", role="user")  # o2
    s.observe("Running the release script.", role="assistant", kind="tool_call",
              meta={"tool_call_id": "r1", "name": "release", "arguments": {"version": "3.2"}})  # o3
    s.observe("release 3.2: 14 migrations applied, smoke tests green", role="tool", kind="tool_result",
              meta={"tool_call_id": "r1"})  # o4
    s.observe("Version 3.2 is live; all smoke tests passed.", role="assistant")  # o5


@pytest.fixture
def session(mem_ledger):
    s = mem_ledger.create_session("release")
    _fill(s)
    return s


@pytest.fixture
def server(session, mem_ledger):
    return create_server(session, by="model:claude-test", budget=4_000, ledger=mem_ledger)


@pytest.mark.anyio
async def test_lists_the_context_and_forensic_tools_with_the_same_schemas(server, session):
    async with mcp.Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == set(TOOL_NAMES) | set(FORENSIC_TOOLS)
    for schema in ContextTools(session).schemas("mcp"):
        tool = listed[schema["name"]]
        assert tool.input_schema == schema["inputSchema"]
        assert tool.description == schema["description"]
    assert listed["ledger_blame"].input_schema["required"] == ["text"]


@pytest.mark.anyio
async def test_a_prune_is_recorded_as_a_call_its_edit_and_its_result(server, session):
    start = session.position
    async with mcp.Client(server) as client:
        result = await client.call_tool("context_prune", {"span_ids": ["o4"], "reason": "release output no longer needed"})
    assert result.is_error is False
    assert "pruned o3, o4" in result.content[0].text
    assert result.structured_content["pruned"] == ["o3", "o4"]
    events = list(session.events(start + 1))
    assert [type(e).__name__ for e in events] == ["Observed", "Pruned", "Pruned", "Observed"]
    call, p1, p2, answer = events
    assert call.kind == "tool_call" and call.role == "assistant" and call.meta["name"] == "context_prune"
    assert call.meta["arguments"] == {"span_ids": ["o4"], "reason": "release output no longer needed"}
    assert call.by == "model:claude-test"
    for p in (p1, p2):
        assert p.by == "model:claude-test" and p.reason.startswith("release output no longer needed")
        # the edit points at the call that made it
        assert p.meta == {"tool_call": call.span_id, "tool_call_position": call.position}
    assert answer.kind == "tool_result" and answer.meta["tool_call_id"] == call.meta["tool_call_id"]
    assert answer.text == result.content[0].text
    # the call and its result render as a valid pair, like any tool exchange
    from tests.provider_rules import check_anthropic, check_openai

    check_openai(session.render("openai"))
    check_anthropic(session.render("anthropic"))


INVALID_ARGUMENTS = [
    ("context_prune", {"span_ids": ["o2"]}, "reason"),
    ("context_prune", {"span_ids": ["o2"], "reason": "x", "force": True}, "force"),
    ("context_prune", {"span_ids": "o2", "reason": "x"}, "span_ids"),
    ("context_prune", {"span_ids": [], "reason": "x"}, "span_ids"),
    ("context_list", {"limit": "5"}, "limit"),
    ("context_list", {"limit": 0}, "limit"),
    ("context_list", {"provenance": "imagined"}, "provenance"),
    ("context_recall", {"span_id": 4}, "span_id"),
    ("context_summarize", {"span_ids": ["o2"], "summary": "", "reason": "x"}, "summary"),
    ("ledger_at", {"position": "3"}, "position"),
    ("ledger_blame", {}, "text"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("name,arguments,field", INVALID_ARGUMENTS, ids=[f"{n}-{f}" for n, _, f in INVALID_ARGUMENTS])
async def test_invalid_arguments_are_refused_by_schema_and_leave_the_log_unchanged(server, session, name, arguments, field):
    position, live = session.position, dict(session.state.live)
    async with mcp.Client(server) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error is True
    assert field in result.content[0].text
    assert session.position == position and session.state.live == live


BAD_REQUESTS = [
    ("context_prune", {"span_ids": ["o1"], "reason": "room"}, "system prompt"),
    ("context_prune", {"span_ids": ["o42"], "reason": "room"}, "o42 does not exist"),
    ("context_summarize", {"span_ids": ["o2"], "summary": "  ", "reason": "x"}, "empty"),
    ("context_restore", {"span_ids": ["o2"]}, "already in your context"),
    ("context_search", {"query": "?!"}, "no words"),
    ("context_explode", {}, "context_explode"),
    ("ledger_at", {"position": 999}, "out of range"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("name,arguments,message", BAD_REQUESTS, ids=[m for _, _, m in BAD_REQUESTS])
async def test_refused_requests_are_error_results_and_leave_the_log_unchanged(server, session, name, arguments, message):
    position = session.position
    async with mcp.Client(server) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error is True and message in result.content[0].text
    assert session.position == position


@pytest.mark.anyio
async def test_summary_of_a_summary_is_refused_and_the_attempt_recorded(server, session):
    async with mcp.Client(server) as client:
        ok = await client.call_tool("context_summarize", {
            "span_ids": ["o2", "o3", "o4", "o5"],
            "summary": "Version 3.2 shipped to production: 14 migrations applied, smoke tests green.",
            "reason": "fold the release",
        })
        assert ok.is_error is False, ok.content[0].text
        derived = ok.structured_content["derived"]
        start = session.position
        refused = await client.call_tool("context_summarize", {
            "span_ids": [derived], "summary": "3.2 shipped.", "reason": "shorter",
        })
    assert refused.is_error is True
    assert "context_rederive" in refused.content[0].text and "context_prune" in refused.content[0].text
    kinds = [type(e).__name__ for e in session.events(start + 1)]
    assert kinds == ["Observed", "RewriteRefused", "Observed"]  # the call, the refusal, the error result
    refusal = session.event(start + 2)
    assert isinstance(refusal, RewriteRefused) and refusal.by == "model:claude-test"
    assert refusal.meta["tool_call"] == session.event(start + 1).span_id
    result = session.event(start + 3)
    assert isinstance(result, Observed) and result.meta["is_error"] is True
    assert max(s.generation for s in session.spans()) == 1


@pytest.mark.anyio
async def test_forensic_tools_and_the_buffer_resource(server, session):
    session.prune("o4", by="harness")
    async with mcp.Client(server) as client:
        position = session.position
        audit = await client.call_tool("ledger_audit", {})
        blame = await client.call_tool("ledger_blame", {"text": "14 migrations"})
        at = await client.call_tool("ledger_at", {"position": 3})
        buffer = await client.read_resource(BUFFER_URI)
    assert session.position == position  # forensic tools are read-only and not recorded
    assert audit.is_error is False and audit.structured_content["ok"] is True
    assert "o4" in blame.content[0].text and "pruned" in blame.content[0].text
    assert at.structured_content["spans"] == ["o1", "o2"]
    text = buffer.contents[0].text
    assert text.startswith("live ") and "/ 4,000 tokens" in text
    assert "[o5] Version 3.2 is live" in text
    assert "[ledger]" in text and "pruned o4" in text  # the harness's edit is announced


def test_cli_refuses_an_unknown_session_with_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'x.db'}", "mcp", "--session", "nobody"])
    assert result.exit_code == 2 and "no session named 'nobody'" in result.output


def test_cli_help_shows_an_example():
    result = CliRunner().invoke(main, ["mcp", "--help"])
    assert result.exit_code == 0 and "ctxledger --db sqlite:///agent.db mcp --session agent-42" in result.output


@pytest.mark.anyio
async def test_over_a_real_stdio_subprocess(tmp_path):
    from mcp import StdioServerParameters

    db = tmp_path / "agent.db"
    ledger = Ledger.open(f"sqlite:///{db}", token_counter=EstimateCounter())
    _fill(ledger.create_session("stdio-agent"))
    ledger.close()
    ctxledger = Path(sys.executable).parent / "ctxledger"
    params = StdioServerParameters(
        command=str(ctxledger),
        args=["--db", f"sqlite:///{db}", "mcp", "--session", "stdio-agent", "--by", "model:stdio", "--budget", "2000"],
        cwd=str(tmp_path),
    )
    async with mcp.Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        listed = await client.call_tool("context_list", {})
        pruned = await client.call_tool("context_prune", {"span_ids": ["o3"], "reason": "done with it"})
        bad = await client.call_tool("context_prune", {"span_ids": ["o3"]})
        hits = await client.call_tool("context_search", {"query": "migrations"})
    assert names == set(TOOL_NAMES) | set(FORENSIC_TOOLS)
    assert listed.content[0].text.startswith("live ") and "/ 2,000 tokens" in listed.content[0].text
    assert pruned.is_error is False and pruned.structured_content["pruned"] == ["o3", "o4"]
    assert bad.is_error is True
    assert [h["span_id"] for h in hits.structured_content["hits"]] == ["o4"]
    ledger = Ledger.open(f"sqlite:///{db}", token_counter=EstimateCounter())
    s = ledger.session("stdio-agent")
    prunes = [e for e in s.events() if isinstance(e, Pruned)]
    assert [p.span_id for p in prunes] == ["o3", "o4"] and all(p.by == "model:stdio" for p in prunes)
    calls = [e for e in s.events() if isinstance(e, Observed) and e.kind == "tool_call" and e.meta["name"].startswith("context_")]
    assert [c.meta["name"] for c in calls] == ["context_list", "context_prune", "context_search"]
    assert s.verify().ok
    ledger.close()


@pytest.mark.anyio
async def test_the_harness_writing_from_another_process_is_seen_and_announced(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    served = Ledger.open(url, token_counter=EstimateCounter())
    s = served.create_session("shared")
    _fill(s)
    harness = Ledger.open(url, token_counter=EstimateCounter())  # another writer, as another process would be
    h = harness.session("shared")
    async with mcp.Client(create_server(s, by="model:x", ledger=served)) as client:
        await client.read_resource(BUFFER_URI)  # the model has seen the buffer
        h.observe("New request: roll back 3.2, the smoke tests missed a checkout bug.", role="user")  # o6
        h.prune("o5", by="compactor:prune-oldest")
        listed = await client.call_tool("context_list", {})
        assert "o6 user message" in listed.content[0].text and "o5 " not in listed.content[0].text
        pruned = await client.call_tool("context_prune", {"span_ids": ["o2"], "reason": "superseded"})
        assert pruned.is_error is False  # no conflict with the other writer
        text = (await client.read_resource(BUFFER_URI)).contents[0].text
    assert "[ledger]" in text and "pruned o5" in text and "compactor:prune-oldest" in text
    h.refresh()
    assert "o2" not in h.state.live and h.verify().ok
    served.close()
    harness.close()


@pytest.mark.anyio
async def test_cli_create_starts_a_new_session(tmp_path):
    from mcp import StdioServerParameters

    db = tmp_path / "fresh.db"
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "ctxledger"),
        args=["--db", f"sqlite:///{db}", "mcp", "--session", "brand-new", "--create"],
        cwd=str(tmp_path),
    )
    async with mcp.Client(params) as client:
        listed = await client.call_tool("context_list", {})
    assert listed.content[0].text.startswith("live 0 tokens in 0 spans")
    ledger = Ledger.open(f"sqlite:///{db}", token_counter=EstimateCounter())
    assert "brand-new" in ledger and ledger.session("brand-new").strict
    ledger.close()
