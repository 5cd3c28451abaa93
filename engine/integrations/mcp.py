"""The context tools over MCP: ``ctxledger mcp --session NAME`` (or ``create_server`` in Python).

One server serves one session of one store, over stdio, with the official MCP Python SDK (``mcp>=2``,
``MCPServer``; ``pip install 'ctxledger[mcp]'``):

- the seven context tools of ``engine.tools`` (same names, arguments and JSON Schemas);
- read-only forensic tools: ``ledger_audit``, ``ledger_blame {text}``, ``ledger_at {position}``;
- the live buffer as the resource ``ledger://buffer`` (rendered with span ids).

Arguments are validated against the schema before anything runs (the SDK refuses missing, extra or
wrong-typed arguments; the tools refuse unknown and non-live spans): a refused call leaves the log
unchanged. A valid ``context_*`` call is recorded as a ``tool_call`` observation, its result as the
matching ``tool_result``, and the edit events it causes point at the call. Errors reach the client
as ``is_error`` results carrying the message (``ToolError``).
"""

from __future__ import annotations

import inspect
import json
import threading
import uuid
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

import msgspec

from engine.errors import LedgerError
from engine.session import Session
from engine.tools import ContextTools, ToolResult, argument_types

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.types import CallToolResult, TextContent
    from pydantic import ConfigDict, Field
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"the MCP server needs the MCP SDK: pip install 'ctxledger[mcp]' ({e})") from None

__all__ = ["create_server", "BUFFER_URI", "FORENSIC_TOOLS"]

BUFFER_URI = "ledger://buffer"
FORENSIC_TOOLS = ("ledger_audit", "ledger_blame", "ledger_at")
RECORDED_BY = "ctxledger-mcp"


def _pydantic_type(tp: Any) -> Any:
    """A msgspec argument type (``Annotated[..., msgspec.Meta(...)]``) as the pydantic type the
    SDK validates with: the same constraints and descriptions."""
    if get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        fields: dict[str, Any] = {}
        for meta in extras:
            if isinstance(meta, msgspec.Meta):
                for key in ("min_length", "max_length", "ge", "le", "description", "pattern"):
                    value = getattr(meta, key)
                    if value is not None:
                        fields[key] = value
        return Annotated[_pydantic_type(base), Field(**fields)]
    if get_origin(tp) is list:
        return list[_pydantic_type(get_args(tp)[0])]
    return tp


def _signature(cls: type) -> inspect.Signature:
    params = []
    for f in msgspec.structs.fields(cls):
        default = inspect.Parameter.empty if f.required else f.default
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=_pydantic_type(f.type), default=default))
    return inspect.Signature(params, return_annotation=CallToolResult)


def _strict_tool(fn: Callable[..., Any], name: str, description: str, schema: dict[str, Any] | None = None) -> Tool:
    """A tool whose arguments the SDK validates strictly: no coercion ("5" is not 5), no unknown
    fields. ``schema`` (when given) is published instead of pydantic's rendering of the same rules."""
    tool = Tool.from_function(fn, name=name, description=description, structured_output=False)
    loose = tool.fn_metadata.arg_model

    strict = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)})
    tool.fn_metadata.arg_model = strict
    tool.parameters = schema if schema is not None else strict.model_json_schema(by_alias=True)
    return tool


def _result(result: ToolResult) -> CallToolResult:
    if result.is_error:
        raise ToolError(result.text)
    return CallToolResult(
        content=[TextContent(type="text", text=result.text)],
        structured_content=json.loads(json.dumps(result.data, default=str)),
    )


class _Recorder:
    """Runs context tool calls against the session, recording each valid call and its result."""

    def __init__(self, session: Session, tools: ContextTools, ledger: Any = None):
        self.session = session
        self.tools = tools
        self.lock = threading.Lock()  # one call at a time: the session is one writer
        # The agent's harness may write to the same session from another process (its observations,
        # its own compaction): each request starts from the log as it is now.
        shared = ledger is not None and not str(getattr(ledger, "url", "memory:")).startswith("memory:")
        self.store = ledger.store if shared else None

    def fresh(self) -> None:
        if self.store is not None and self.store.head_version(self.session.id) != self.session.position:
            self.session.refresh()

    def run(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        call_id = f"mcp_{uuid.uuid4().hex[:20]}"
        recorded: list[Any] = []
        args = dict(arguments)

        def record_call():
            span = self.session.observe(
                f"{name} {json.dumps(args, ensure_ascii=False)}",
                role="assistant",
                kind="tool_call",
                meta={"tool_call_id": call_id, "name": name, "arguments": args},
                by=self.tools.by,
            )
            recorded.append(span)
            return span

        with self.lock:
            try:
                self.fresh()
                result = self.tools.call(name, args, record_call=record_call)
                if recorded:
                    self.session.observe(
                        result.text,
                        role="tool",
                        kind="tool_result",
                        meta={"tool_call_id": call_id, "is_error": result.is_error},
                        by=RECORDED_BY,
                    )
            except LedgerError as e:  # the store failed: say so, as the model's tools do
                raise ToolError(e.message) from None
        return _result(result)

    def read(self, fn: Callable[[], Any], error: type[Exception] = ToolError) -> Any:
        with self.lock:
            try:
                self.fresh()
                return fn()
            except LedgerError as e:
                raise error(e.message) from None


def _context_tool(recorder: _Recorder, name: str, cls: type, description: str, schema: dict[str, Any]) -> Tool:
    defaults = {f.name: f.default for f in msgspec.structs.fields(cls) if not f.required}

    def fn(**arguments: Any) -> CallToolResult:
        # the SDK fills in the defaults: record the arguments as the model would have written them
        return recorder.run(name, {k: v for k, v in arguments.items() if k not in defaults or v != defaults[k]})

    fn.__name__ = name
    fn.__signature__ = _signature(cls)  # type: ignore[attr-defined]
    return _strict_tool(fn, name, description, schema)


def create_server(
    session: Session,
    *,
    budget: int | None = None,
    gate: bool = True,
    by: str = "model",
    ledger: Any = None,
    name: str = "ctxledger",
) -> MCPServer:
    """An MCP server for ``session``: the context tools (edits by ``by``, grounding gate on unless
    ``gate=False``), the forensic tools and the buffer resource. Run it with
    ``server.run(transport="stdio")`` or test it in process with ``mcp.Client(server)``."""
    tools = ContextTools(session, budget=budget, gate=gate, by=by, ledger=ledger)
    recorder = _Recorder(session, tools, ledger)
    mcp_tools = []
    for schema in tools.schemas("mcp"):
        tool_name = schema["name"]
        mcp_tools.append(
            _context_tool(recorder, tool_name, argument_types()[tool_name], schema["description"], schema["inputSchema"])
        )

    def ledger_audit() -> CallToolResult:
        def run():
            report = session.audit()
            lines = [f"audit of {session.name!r} at position {report.position}: "
                     f"{'ok' if report.ok else 'DRIFT FOUND'} ({report.errors} errors, {report.warnings} warnings)"]
            lines += [f"- {f.severity} {f.kind}: {f.message}" for f in report.findings[:50]]
            return CallToolResult(
                content=[TextContent(type="text", text="\n".join(lines))],
                structured_content=msgspec.to_builtins(report),
            )

        return recorder.read(run)

    def ledger_blame(
        text: Annotated[str, Field(min_length=1, max_length=2_000, description="A piece of text to trace back to where it came from.")],
    ) -> CallToolResult:
        def run():
            hits = session.blame(text)
            if not hits:
                body = f"{text!r} is in no span of this session"
            else:
                body = "\n".join(f"- {h.message}" for h in hits[:20])
            return CallToolResult(
                content=[TextContent(type="text", text=body)],
                structured_content={"hits": msgspec.to_builtins(hits[:20])},
            )

        return recorder.read(run)

    def ledger_at(
        position: Annotated[int, Field(ge=1, description="A position in the session's log (1 is the first event).")],
    ) -> CallToolResult:
        def run():
            view = session.at(position)
            body = view.render("text", ids=True) or "(the buffer was empty)"
            return CallToolResult(
                content=[TextContent(type="text", text=f"the buffer at position {position} of {session.position}:\n{body}")],
                structured_content={"position": position, "spans": [s.id for s in view.spans()], "tokens": view.tokens},
            )

        return recorder.read(run)

    mcp_tools += [
        _strict_tool(ledger_audit, "ledger_audit", "Audit this session's log for drift (read-only): summaries of summaries, "
                     "specifics in a summary that none of its sources state, refused rewrites, a broken hash chain."),
        _strict_tool(ledger_blame, "ledger_blame", "Where a piece of text in the context came from (read-only): the "
                     "observation or summary that holds it, whether it is grounded in an observation, and what removed it."),
        _strict_tool(ledger_at, "ledger_at", "The context buffer exactly as it was at an earlier position of the log "
                     "(read-only time travel)."),
    ]
    server = MCPServer(
        name,
        instructions=(
            f"Context tools for the ctxledger session {session.name!r}. Span ids (o17 observed, d3 derived) "
            "appear in the buffer resource. Summaries cannot be summarized again: prune or re-derive them."
        ),
        tools=mcp_tools,
        log_level="WARNING",
    )

    @server.resource(BUFFER_URI, name="buffer", description="The live context buffer, with span ids.", mime_type="text/plain")
    def buffer() -> str:
        return recorder.read(lambda: f"{tools.budget_line()}\n\n{tools.render('text')}", ResourceError)

    return server
