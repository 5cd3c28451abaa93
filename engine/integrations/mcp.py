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
    from pydantic import ConfigDict, Field, ValidationError
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"the MCP server needs the MCP SDK: pip install 'ctxledger[mcp]' ({e})") from None

__all__ = ["create_server", "create_follow_server", "BUFFER_URI", "FORENSIC_TOOLS", "FOLLOW_TOOLS"]

BUFFER_URI = "ledger://buffer"
FORENSIC_TOOLS = ("ledger_audit", "ledger_blame", "ledger_at")
RECORDED_BY = "ctxledger-mcp"
FOLLOW_TOOLS = ("context_search", "context_recall", "ledger_blame", "ledger_lost", "ledger_audit")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxledger")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "0+unknown"


_TYPE_WORDS = {
    "list_type": "a list", "int_type": "an integer", "int_parsing": "an integer", "string_type": "a string",
    "bool_type": "true or false", "bool_parsing": "true or false", "dict_type": "an object",
    "float_type": "a number",
}


def _argument_problem(tool: str, exc: ValidationError, schema: dict[str, Any]) -> str:
    """A refused call's arguments in words a model can act on: each bad argument and what it must be,
    then the arguments the tool takes (never pydantic's text, its links or the values sent)."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = set(schema.get("required", ())) if isinstance(schema, dict) else set()
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        kind, ctx = err.get("type", ""), err.get("ctx") or {}
        if kind == "missing":
            problems.append(f"'{field}' is required")
        elif kind == "extra_forbidden":
            problems.append(f"'{field}' is not an argument of {tool}")
        elif kind in _TYPE_WORDS:
            problems.append(f"'{field}' must be {_TYPE_WORDS[kind]}")
        elif kind in ("too_short", "string_too_short") and "min_length" in ctx:
            problems.append(f"'{field}' must have at least {ctx['min_length']} "
                            + ("character" if kind == "string_too_short" else "item") + ("s" if ctx["min_length"] != 1 else ""))
        elif kind in ("too_long", "string_too_long") and "max_length" in ctx:
            problems.append(f"'{field}' must have at most {ctx['max_length']} "
                            + ("characters" if kind == "string_too_long" else "items"))
        elif kind == "string_pattern_mismatch":
            hint = props.get(field, {}).get("description", "") if isinstance(props.get(field), dict) else ""
            problems.append(f"'{field}' is not in the expected form" + (f" ({hint.rstrip('.')})" if hint else ""))
        elif kind == "greater_than_equal":
            problems.append(f"'{field}' must be {ctx.get('ge')} or more")
        elif kind == "less_than_equal":
            problems.append(f"'{field}' must be {ctx.get('le')} or less")
        else:
            problems.append(f"'{field}': {str(err.get('msg', 'not valid')).rstrip('.').lower()}")
    takes = ", ".join(f"{name}{'' if name in required else '?'}" for name in props) or "no arguments"
    return f"{tool} refused its arguments: {'; '.join(dict.fromkeys(problems))}. It takes: {takes}. Nothing was changed."


class _LedgerTool(Tool):
    """A tool whose refusals read as one short message: argument problems in words (not pydantic's
    report), and a deliberate ``ToolError`` without the SDK's "Error executing tool ..." prefix."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            raise ToolError(_argument_problem(self.name, exc, self.parameters)) from None
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if type(exc) is ToolError and type(cause) is ToolError:
                raise ToolError(str(cause)) from None
            raise


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
    tool = _LedgerTool.from_function(fn, name=name, description=description, structured_output=False)
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


def _audit_result(session: Session) -> CallToolResult:
    report = session.audit()
    lines = [f"audit of {session.name!r} at position {report.position}: "
             f"{'ok' if report.ok else 'DRIFT FOUND'} ({report.errors} errors, {report.warnings} warnings)"]
    lines += [f"- {f.severity} {f.kind}: {f.message}" for f in report.findings[:50]]
    return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                          structured_content=msgspec.to_builtins(report))


def _blame_result(session: Session, text: str) -> CallToolResult:
    hits = session.blame(text)
    body = "\n".join(f"- {h.message}" for h in hits[:20]) if hits else f"{text!r} is in no span of this session"
    return CallToolResult(content=[TextContent(type="text", text=body)],
                          structured_content={"hits": msgspec.to_builtins(hits[:20])})


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
        return recorder.read(lambda: _audit_result(session))

    def ledger_blame(
        text: Annotated[str, Field(min_length=1, max_length=2_000, description="A piece of text to trace back to where it came from.")],
    ) -> CallToolResult:
        return recorder.read(lambda: _blame_result(session, text))

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
        version=_version(),
    )

    @server.resource(BUFFER_URI, name="buffer", description="The live context buffer, with span ids.", mime_type="text/plain")
    def buffer() -> str:
        return recorder.read(lambda: f"{tools.budget_line()}\n\n{tools.render('text')}", ResourceError)

    return server


class _Follower:
    """The session the hooks recorded, re-resolved at every call (the agent may have started a new
    session in the same directory), and its read-only tools."""

    def __init__(self, ledger: Any, resolve: Callable[[], str], recall_tokens: int):
        self.ledger = ledger
        self.resolve = resolve
        self.recall_tokens = recall_tokens
        self.lock = threading.Lock()
        self.session: Session | None = None
        self.tools: ContextTools | None = None

    def current(self) -> tuple[Session, ContextTools]:
        name = self.resolve()
        s = self.session
        if s is None or s.name != name:
            s = self.session = self.ledger.session(name)
            self.tools = ContextTools(s, by="model", recall_tokens=self.recall_tokens, ledger=self.ledger)
        elif self.ledger.store.head_version(s.id) != s.position:
            s.refresh()
        assert self.tools is not None
        return s, self.tools

    def read(self, fn: Callable[[Session, ContextTools], Any]) -> Any:
        with self.lock:
            try:
                return fn(*self.current())
            except LedgerError as e:
                raise ToolError(e.message) from None


def create_follow_server(ledger: Any, resolve: Callable[[], str], *, agent: str, where: str = "",
                         recall_tokens: int = 2_000, name: str = "ctxledger") -> MCPServer:
    """Read-only tools over the session an agent's hooks recorded (``ctxledger mcp --follow``), for an
    agent whose context ctxledger does not own: ``context_search`` (the whole log),
    ``context_recall`` (originals, paged under ``recall_tokens``), ``ledger_blame``, ``ledger_lost``
    and ``ledger_audit``. ``resolve()`` names the session at each call. Nothing is recorded."""
    from engine.lost_kept import lost_report
    from projections.lost import summary_of

    follower = _Follower(ledger, resolve, recall_tokens)
    named: list[tuple[str, Callable[..., CallToolResult]]] = []
    for tool_name in ("context_search", "context_recall"):
        cls = argument_types()[tool_name]
        defaults = {f.name: f.default for f in msgspec.structs.fields(cls) if not f.required}

        def fn(_name=tool_name, _defaults=defaults, **arguments: Any) -> CallToolResult:
            args = {k: v for k, v in arguments.items() if k not in _defaults or v != _defaults[k]}
            return follower.read(lambda s, tools: _result(tools.call(_name, args)))

        fn.__name__ = tool_name
        fn.__signature__ = _signature(cls)  # type: ignore[attr-defined]
        named.append((tool_name, fn))

    def ledger_audit() -> CallToolResult:
        return follower.read(lambda s, _tools: _audit_result(s))

    def ledger_blame(
        text: Annotated[str, Field(min_length=1, max_length=2_000, description="A piece of text to trace back to where it came from.")],
    ) -> CallToolResult:
        return follower.read(lambda s, _tools: _blame_result(s, text))

    def ledger_lost(
        compaction: Annotated[str, Field(default="", max_length=20, pattern=r"^(d[0-9]+)?$",
                                         description="The summary's span id (d1, d2, ...); default the newest compaction.")] = "",
    ) -> CallToolResult:
        def run(s: Session, _tools: ContextTools) -> CallToolResult:
            summary = summary_of(s, compaction or None)
            report = lost_report(s, summary)
            lines = [f"{summary.id} replaced {report.sources} observations; kept per category:"]
            for c in report.categories:
                lines.append(f"- {c.name}: {c.kept} of {c.total} kept"
                             + (f"; dropped e.g. {', '.join(repr(i.text[:80]) + ' (' + i.span_id + ')' for i in c.dropped[:5])}"
                                if c.dropped else ""))
            lines.append("read a dropped item's source with context_recall")
            return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                                  structured_content=msgspec.to_builtins(report))

        return follower.read(run)

    tools_out = [_strict_tool(fn, n, _FOLLOW_DESCRIPTIONS[n]) for n, fn in named]
    tools_out += [
        _strict_tool(ledger_blame, "ledger_blame", _FOLLOW_DESCRIPTIONS["ledger_blame"]),
        _strict_tool(ledger_lost, "ledger_lost", _FOLLOW_DESCRIPTIONS["ledger_lost"]),
        _strict_tool(ledger_audit, "ledger_audit", _FOLLOW_DESCRIPTIONS["ledger_audit"]),
    ]
    return MCPServer(
        name,
        instructions=(
            f"Read-only tools over what the ctxledger hooks recorded of this {agent} session"
            + (f" (started in {where})" if where else "")
            + ": everything the session observed, including what compactions summarized away. "
            "Span ids: o17 an observation, d3 a summary. Nothing you call here is recorded."
        ),
        tools=tools_out,
        log_level="WARNING",
        version=_version(),
    )


_FOLLOW_DESCRIPTIONS = {
    "context_search": "Search everything this session observed, including what compactions summarized away; "
                      "returns span ids with snippets. Read one in full with context_recall.",
    "context_recall": "Read back the original text of an observation (o17), or the original observations a "
                      "summary (d3) was made from, from the ledger. Long texts come in pages.",
    "ledger_blame": "Where a piece of text in your context came from: the observation or summary that holds it, "
                    "whether an observation supports it, and what removed it.",
    "ledger_lost": "What a compaction dropped, by category (user messages, instructions, file paths, commands, "
                   "errors, numbers, ids): kept/total and the dropped items with the span holding each.",
    "ledger_audit": "Audit this session's summaries against what the model saw when it wrote them: unsupported "
                    "statements, invented instructions, dropped specifics.",
}

