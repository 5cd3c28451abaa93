"""Nesting depth and size as hypothesis strategies across every way in (issue 24, "Also"): the Python
API, the model's context tools, the MCP server (in process and as a real stdio subprocess fed raw
JSON-RPC), the transcript importers and the export format. Whatever comes in is either accepted
(and then readable: the chain verifies, every event nests within what readers decode, an export
round-trips) or refused with a typed error, the log unchanged; never a RecursionError. (The proxy's
guards are the proxy's own tests.)"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, ImportFormatError, InvalidInputError, Ledger, LedgerError
from engine import validate
from engine._store.codec import READABLE_DEPTH, chain_hash, encode_payload
from engine.importers import import_path
from engine.tools import TOOL_NAMES, ContextTools
from engine._store.transfer import EVENT_DECODERS, import_lines

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
LIMIT = validate.MAX_META_DEPTH
CTXLEDGER = str(Path(sys.executable).with_name("ctxledger"))


def build(depth: int, kind: str, width: int, leaf: str) -> object:
    """A value ``depth`` containers deep, ``width`` leaves wide at the bottom, built without
    recursion (so the test itself survives the depths it sends)."""
    value: object = [leaf] * width if width > 1 else leaf
    for i in range(depth - (1 if width > 1 else 0)):
        value = {f"k{i % 3}": value} if kind == "dict" or (kind == "mixed" and i % 2) else [value]
    return value


depths = st.one_of(st.integers(0, 2 * LIMIT + 10), st.sampled_from([LIMIT - 1, LIMIT, LIMIT + 1, 500, 1200]))
shapes = st.tuples(depths, st.sampled_from(["list", "dict", "mixed"]), st.integers(1, 4),
                   st.text(max_size=40) | st.sampled_from(["x" * 70_000, "é" * 40_000]))


def readable_everywhere(ledger: Ledger, name: str) -> None:
    """What an accepted write must leave: a verified chain, every event within the readers' depth,
    an export that imports elsewhere to the same lines."""
    s = ledger.session(name)
    assert s.verify().ok
    for ev in s.events():
        assert validate.nesting(ev, READABLE_DEPTH) <= READABLE_DEPTH
    lines = s.export()
    other = Ledger.open("memory://", token_counter=EstimateCounter())
    assert other.session(import_lines(other.store, lines)).export() == lines


@pytest.fixture(scope="module")
def api_ledger():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    yield led
    led.close()


COMMANDS = ["observe", "prune", "rewrite", "tool call"]
NAMES = itertools.count()


@FUZZ
@given(shape=shapes, command=st.sampled_from(COMMANDS))
@example(shape=(5000, "list", 1, "x"), command="observe")
@example(shape=(100_000, "dict", 1, "x"), command="rewrite")
def test_api_accepts_what_readers_decode_and_refuses_the_rest(api_ledger, shape, command):
    depth, kind, width, leaf = shape
    name = f"api-{next(NAMES)}"
    s = api_ledger.create_session(name)
    s.observe("first")
    value = build(depth, kind, width, leaf)
    before = s.export()
    try:
        if command == "observe":
            s.observe("x", meta={"v": value})
        elif command == "prune":
            s.prune("o1", meta={"v": value})
        elif command == "rewrite":
            s.rewrite(["o1"], "sum", meta={"v": value})
        else:
            s.observe("call", role="assistant", kind="tool_call", meta={"tool_call_id": "c", "name": "t", "arguments": value})
    except InvalidInputError as e:
        assert depth + 1 > LIMIT or len(leaf.encode()) * width > validate.MAX_META_BYTES // 2 or "bytes" in e.message
        assert "\n" not in e.message
        assert s.export() == before and api_ledger.session(name).export() == before
        return
    assert depth + 1 <= LIMIT
    readable_everywhere(api_ledger, name)


@FUZZ
@given(shape=shapes, tool=st.sampled_from(TOOL_NAMES), field=st.sampled_from(["span_ids", "reason", "summary", "query", "extra"]),
       as_text=st.booleans())
def test_context_tools_refuse_nested_arguments_as_an_error_result(shape, tool, field, as_text):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("tools")
    s.observe("one")
    s.observe("two")
    before = s.export()
    depth, kind, width, leaf = shape
    args = {field: build(max(depth, 1), kind, width, leaf)}
    if as_text:
        inner = json.dumps("leaf")
        args_text = '{"%s": %s%s%s}' % (field, "[" * max(depth, 1), inner, "]" * max(depth, 1))
        result = ContextTools(s).call(tool, args_text)
    else:
        result = ContextTools(s).call(tool, args)
    if result.is_error:
        assert s.export() == before
    else:
        readable_everywhere(led, "tools")


@FUZZ
@given(shape=shapes, tool=st.sampled_from(["context_prune", "context_restore", "context_summarize", "ledger_blame"]),
       field=st.sampled_from(["span_ids", "reason", "summary", "text", "extra"]))
def test_the_mcp_server_refuses_nested_arguments_and_records_nothing(shape, tool, field):
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from engine.integrations.mcp import create_server

    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("mcp")
    s.observe("one")
    s.observe("two")
    before = s.export()
    depth, kind, width, leaf = shape
    server = create_server(s, by="model:fuzz", ledger=led)

    async def call():
        try:
            return await server.call_tool(tool, {field: build(max(depth, 1), kind, width, leaf)})
        except ToolError as e:
            return e

    outcome = anyio.run(call)
    if isinstance(outcome, Exception):
        assert s.export() == before and led.session("mcp").export() == before
    else:
        readable_everywhere(led, "mcp")


def _rpc(proc: subprocess.Popen, message: dict | str) -> None:
    proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen, want: int, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("the MCP server closed its stdout")
        msg = json.loads(line)
        if msg.get("id") == want:
            return msg
    raise AssertionError(f"no answer to request {want}")


@pytest.mark.parametrize("depth", [300, 5000, 200_000])
def test_raw_json_rpc_nested_past_any_parser_does_not_bring_the_mcp_server_down(tmp_path, depth):
    pytest.importorskip("mcp")
    db = f"sqlite:///{tmp_path / 'mcp.db'}"
    with Ledger.open(db, token_counter=EstimateCounter()) as led:
        s = led.create_session("served")
        s.observe("one")
        before = s.export()
    proc = subprocess.Popen([CTXLEDGER, "--db", db, "mcp", "--session", "served"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ})
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}})
        assert "result" in _answer(proc, 1)
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        hostile = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "context_prune", ' \
                  '"arguments": {"span_ids": %s"o1"%s}}}' % ("[" * depth, "]" * depth)
        _rpc(proc, hostile)
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        listed = _answer(proc, 3)  # whatever became of request 2, the server still answers
        assert {t["name"] for t in listed["result"]["tools"]} >= set(TOOL_NAMES)
        assert proc.poll() is None
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    with Ledger.open(db, token_counter=EstimateCounter()) as led:
        assert led.session("served").export() == before


DATA = Path(__file__).parents[1] / "data" / "transcripts"
CC = DATA / "claude_code" / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"


@FUZZ
@given(shape=shapes, where=st.sampled_from(["tool input", "user content", "unknown field"]), skip_bad=st.booleans())
@example(shape=(1200, "list", 1, "x"), where="tool input", skip_bad=False)
def test_importers_take_what_readers_decode_and_name_the_line_of_the_rest(tmp_path_factory, shape, where, skip_bad):
    depth, kind, width, leaf = shape
    value = json.dumps(build(depth, kind, width, leaf)) if depth < 900 else "[" * depth + "1" + "]" * depth
    line = {
        "tool input": '{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"tz","name":"x","input":{"a":%s}}]}}',
        "user content": '{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi","extra":%s}]}}',
        "unknown field": '{"type":"user","message":{"role":"user","content":"hi"},"extra":%s}',
    }[where] % value
    lines = CC.read_bytes().splitlines(keepends=True)
    lines.insert(5, line.encode() + b"\n")
    f = tmp_path_factory.mktemp("imp") / CC.name
    f.write_bytes(b"".join(lines))
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    try:
        result = import_path(led, f, format="claude-code", skip_bad=skip_bad)
    except ImportFormatError as e:
        assert not skip_bad and e.line == 6 and f"{f}: line 6" in e.message
        assert led.sessions() == []
        return
    for s in result.sessions:
        readable_everywhere(led, s.name)


@FUZZ
@given(shape=shapes, event=st.sampled_from([1, 2, 3]))
def test_an_export_carrying_nested_meta_is_imported_whole_or_not_at_all(shape, event):
    depth, kind, width, leaf = shape
    src = Ledger.open("memory://", token_counter=EstimateCounter())
    s = src.create_session("exp")
    s.prune(s.observe("one").id)
    s.observe("two")
    out, prev = [], b""
    for i, raw in enumerate(s.export()):
        d = msgspec.json.decode(raw)
        if i == event:
            d["event"]["meta"] = {"v": build(min(depth, 400), kind, width, leaf)}
        ev = msgspec.structs.replace(EVENT_DECODERS[d["type"]].decode(msgspec.json.encode(d["event"])), prev=prev)
        payload = encode_payload(ev)
        d["event"], d["hash"] = msgspec.json.decode(msgspec.json.encode(ev)), chain_hash(payload).hex()
        prev = chain_hash(payload)
        out.append(msgspec.json.encode(d).decode())
    dst = Ledger.open("memory://", token_counter=EstimateCounter())
    try:
        name = dst.import_(out).name
    except LedgerError as e:
        assert isinstance(e, (InvalidInputError, ImportFormatError)) and "\n" not in e.message
        assert dst.sessions() == []
        return
    assert min(depth, 400) + 1 <= LIMIT
    readable_everywhere(dst, name)
