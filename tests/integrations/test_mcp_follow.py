"""``ctxledger mcp --follow``: read-only tools over the session an agent's hooks recorded, in process
(``mcp.Client(server)``) and over a real stdio subprocess started in the recorded directory; and the
short argument errors every ctxledger MCP tool gives (issue 26)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine import Ledger
from engine.hooks.state import recorded, remember

import mcp  # noqa: E402  (the [mcp] extra)
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from engine.integrations.mcp import FOLLOW_TOOLS, create_follow_server, create_server  # noqa: E402


def _agent_session(ledger: Ledger, name: str):
    """A session as the Claude Code importer writes one: observations, then a compaction."""
    s = ledger.create_session(name, strict=False)
    s.observe("Never deploy on Fridays; ship the cart fix behind the flag.", role="user")
    s.observe("pytest -q", role="assistant", kind="tool_call",
              meta={"tool_call_id": "c1", "name": "Bash", "arguments": {"command": "pytest -q tests/test_cart.py"}})
    s.observe("FAILED tests/test_cart.py::test_discount\n" + "trace line\n" * 3000, role="tool", kind="tool_result",
              meta={"tool_call_id": "c1", "is_error": True})
    s.observe("The discount rounds the wrong way in src/shop/cart.py.", role="assistant")
    s.rewrite(["o1", "o2", "o3", "o4"], "The user wants the cart fix; a test failed.", by="claude-code:compact:auto")
    return s


@pytest.fixture
def followed(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLEDGER_HOOKS_STATE", str(tmp_path / "state"))
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    project = tmp_path / "shop"
    (project / "src").mkdir(parents=True)
    with Ledger.open(url) as ledger:
        _agent_session(ledger, "claude-code:s1")
    remember("claude-code", str(project), "claude-code:s1", url)
    return url, project


@pytest.mark.anyio
async def test_follow_tools_read_and_record_nothing(followed):
    url, project = followed
    with Ledger.open(url) as ledger:
        server = create_follow_server(ledger, lambda: recorded("claude-code", str(project / "src"))["session"],
                                      agent="claude-code", recall_tokens=200)
        position = ledger.session("claude-code:s1").position
        async with mcp.Client(server) as c:
            assert c.server_info.version
            assert sorted(t.name for t in (await c.list_tools()).tools) == sorted(FOLLOW_TOOLS)
            r = await c.call_tool("context_search", {"query": "Fridays"})
            assert not r.is_error and "o1" in r.content[0].text
            r = await c.call_tool("context_recall", {"span_id": "d1"})
            assert not r.is_error and "page 1 of" in r.content[0].text
            pages = r.structured_content["pages"]
            assert pages > 1 and ledger.counter.count(r.structured_content["text"]) <= 200
            r = await c.call_tool("context_recall", {"span_id": "d1", "page": pages})
            assert not r.is_error
            r = await c.call_tool("ledger_lost", {})
            assert not r.is_error
            cats = {cat["name"]: cat for cat in r.structured_content["categories"]}
            assert cats["instructions"]["total"] == 1 and cats["commands"]["kept"] == 0
            r = await c.call_tool("ledger_blame", {"text": "a test failed"})
            assert not r.is_error
            r = await c.call_tool("ledger_audit", {})
            assert not r.is_error and "audit of 'claude-code:s1'" in r.content[0].text
            r = await c.call_tool("context_recall", {"span_id": "o99"})
            assert r.is_error and not r.content[0].text.startswith("Error executing")
        assert ledger.session("claude-code:s1").position == position  # nothing was recorded


@pytest.mark.anyio
async def test_follow_names_the_newest_recorded_session_at_each_call(followed):
    url, project = followed
    with Ledger.open(url) as ledger:
        server = create_follow_server(ledger, lambda: recorded("claude-code", str(project))["session"], agent="claude-code")
        async with mcp.Client(server) as c:
            r = await c.call_tool("ledger_audit", {})
            assert "claude-code:s1" in r.content[0].text
            s2 = ledger.create_session("claude-code:s2")
            s2.observe("a new session in the same directory", role="user")
            remember("claude-code", str(project), "claude-code:s2", url)
            r = await c.call_tool("ledger_audit", {})
            assert "claude-code:s2" in r.content[0].text


def _plain(text: str) -> None:
    assert "pydantic" not in text and "errors.pydantic.dev" not in text
    assert not text.lower().startswith("error executing") and "error: error" not in text.lower()
    assert len(text) < 300


@pytest.mark.anyio
@pytest.mark.parametrize("tool, args, says", [
    ("context_prune", {"span_ids": "o1", "reason": "x"}, "'span_ids' must be a list"),
    ("context_recall", {"span_id": "o1", "page": "2"}, "'page' must be an integer"),
    ("ledger_blame", {}, "'text' is required"),
    ("context_list", {"bogus": 1}, "'bogus' is not an argument of context_list"),
    ("context_recall", {"span_id": "o1", "page": 0}, "'page' must be 1 or more"),
    ("context_summarize", {"span_ids": ["o1"], "summary": "", "reason": "r"}, "'summary'"),
])
async def test_argument_errors_are_short_and_actionable(mem_ledger, tool, args, says):
    s = mem_ledger.create_session("a")
    s.observe("hello", role="user")
    async with mcp.Client(create_server(s, ledger=mem_ledger)) as c:
        assert c.server_info.version
        r = await c.call_tool(tool, args)
    assert r.is_error
    text = r.content[0].text
    _plain(text)
    assert says in text and "It takes:" in text and "Nothing was changed." in text
    assert s.position == 2


@pytest.mark.anyio
async def test_a_refused_edit_keeps_its_own_message(mem_ledger):
    s = mem_ledger.create_session("a")
    s.observe("hello", role="user")
    async with mcp.Client(create_server(s, ledger=mem_ledger)) as c:
        r = await c.call_tool("context_prune", {"span_ids": ["o7"], "reason": "x"})
    assert r.is_error
    _plain(r.content[0].text)
    assert r.content[0].text.startswith("error: ") and "o7" in r.content[0].text


@pytest.mark.anyio
async def test_mcp_follow_over_stdio_in_the_recorded_directory(followed, tmp_path):
    url, project = followed
    env = {**os.environ, "CTXLEDGER_HOOKS_STATE": str(tmp_path / "state")}
    env.pop("CTXLEDGER_URL", None)
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("ctxledger")), args=["mcp", "--follow", "claude-code"],
                                   env=env, cwd=str(project / "src"))
    async with mcp.Client(params) as c:
        r = await c.call_tool("context_search", {"query": "discount"})
        assert not r.is_error and "o4" in r.content[0].text
    with Ledger.open(url) as ledger:
        assert ledger.session("claude-code:s1").position == 6


def test_mcp_needs_one_mode(tmp_path):
    from click.testing import CliRunner

    from engine.cli import main

    for args in (["mcp"], ["mcp", "--session", "a", "--follow", "codex"]):
        r = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path / 'x.db'}", *args])
        assert r.exit_code == 2 and "--session NAME or --follow AGENT" in r.output
