"""ctxledger under LangChain v1: agent middleware for ``create_agent``, and a chat message history.

    from langchain.agents import create_agent
    from engine.integrations.langchain import LedgerMiddleware

    agent = create_agent(model, tools, middleware=[LedgerMiddleware(ledger, "support-7", compactor)])

The middleware records every new message of the graph state as an observation and hands the model
the ledger's compacted live buffer, while the graph's own state keeps every message (so LangGraph
checkpoints hold the whole conversation and the ledger holds the whole log; only the model's view is
compacted). ``LedgerChatMessageHistory`` is the same buffer for chain-style apps
(``RunnableWithMessageHistory``): ``messages`` is the live buffer, ``add_messages`` observes,
``clear`` prunes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from engine.compaction import Compactor, StepResult
from engine.errors import ConcurrencyError, InvalidInputError
from engine.events import Observed
from engine.integrations._live_view import (
    Entry,
    LiveView,
    Observation,
    Shown,
    check_observations,
    fits_meta,
    open_session,
    require,
    to_json_text,
    write_observations,
)
from engine.ledger import Ledger
from engine.otel import live
from engine.render import derived_marker
from engine.session import Session
from engine.spans import Span

_WHAT = "LangChain (langchain, langchain-core, langgraph)"
require("langchain.agents.middleware", "langchain", _WHAT)

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

__all__ = ["LedgerMiddleware", "LedgerChatMessageHistory", "message_to_observations", "to_messages"]

BY = "langchain"

# meta keys (besides the tool-pairing contract's tool_call_id / name / arguments)
MESSAGE = "message"  # the original message as message_to_dict gives it, minus the span's text
MESSAGE_TEXT = "message_text"  # "content" when the span text is the content; "*" when it is the whole message as JSON
KEY = "lc_key"  # the message's id (or a digest), shared by every span of one message
CALL = "lc_call"  # an AI message's tool call: its index ...
CALLS = "lc_calls"  # ... and how many the message has

_ROLE_OF_TYPE = {
    "human": "user",
    "HumanMessageChunk": "user",
    "system": "system",
    "SystemMessageChunk": "system",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
}
_CHAT_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system"}
_CLASS_OF_ROLE = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


# -- messages in ---------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif isinstance(block, dict):
            out.append(f"[{block.get('type') or 'block'}]")
    return "\n".join(out)


def _key(message: BaseMessage, data: dict[str, Any], where: str) -> str:
    if isinstance(message.id, str) and message.id:
        return message.id
    body = {k: v for k, v in data["data"].items() if k != "id"}
    return "sha256:" + hashlib.sha256(to_json_text([data["type"], body], where).encode()).hexdigest()[:32]


def _with_text(data: dict[str, Any], text: str, role: str, kind: str, meta: dict[str, Any]) -> Observation:
    """The message kept in meta: without its content when the content is the span's text, whole
    otherwise (as the span text in JSON when it is too large for meta)."""
    content = data["data"].get("content")
    if isinstance(content, str) and content.strip() and content == text:
        slim = {**meta, MESSAGE: {**data, "data": {**data["data"], "content": None}}, MESSAGE_TEXT: "content"}
        if fits_meta(slim):
            return text, role, kind, slim
    else:
        full = {**meta, MESSAGE: data}
        if fits_meta(full):
            return text if text.strip() else "[empty]", role, kind, full
    return to_json_text(data, "the message"), role, kind, {**meta, MESSAGE_TEXT: "*"}


def message_to_observations(message: Any, index: int = 0) -> list[Observation]:
    """One LangChain message as (text, role, kind, meta) records for ``Session.observe``: one record,
    or one ``tool_call`` record per tool call of an AI message. Raises ``InvalidInputError`` for what
    is not a message, a tool message without ``tool_call_id``, a tool call without an id."""
    where = f"message {index}"
    if not isinstance(message, BaseMessage):
        raise InvalidInputError(f"{where} is a {type(message).__name__}, not a LangChain message (BaseMessage)")
    try:
        data = message_to_dict(message)
    except Exception as e:  # a message whose fields do not serialize
        raise InvalidInputError(f"{where} cannot be serialized: {type(e).__name__}: {e}") from None
    key = _key(message, data, where)
    text = _content_text(message.content)
    mtype = data["type"]
    if mtype in ("tool", "ToolMessageChunk"):
        call_id = getattr(message, "tool_call_id", None)
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"{where}: a tool message needs a tool_call_id (a non-empty str)")
        return [_with_text(data, text, "tool", "tool_result", {"tool_call_id": call_id, KEY: key})]
    tool_calls = getattr(message, "tool_calls", None) or []
    if mtype in ("ai", "AIMessageChunk") and tool_calls:
        records: list[Observation] = []
        for i, call in enumerate(tool_calls):
            call_id, name, args = call.get("id"), call.get("name"), call.get("args", {})
            if not isinstance(call_id, str) or not call_id:
                raise InvalidInputError(f"{where}: tool call {i} ({name!r}) has no id, so no result can answer it")
            if not isinstance(name, str) or not name:
                raise InvalidInputError(f"{where}: tool call {i} has no name")
            call_text = f"{name}({to_json_text(args, f'{where}: the arguments of tool call {i}')})"
            meta = {"tool_call_id": call_id, "name": name, "arguments": args, KEY: key, CALL: i, CALLS: len(tool_calls)}
            if i:
                records.append((call_text, "assistant", "tool_call", meta))
                continue
            first = f"{text}\n{call_text}" if text.strip() else call_text
            full = {**meta, MESSAGE: data}
            if fits_meta(full):
                records.append((first, "assistant", "tool_call", full))
            else:  # too large for meta: the message as JSON is the span text (its arguments too)
                slim = {k: v for k, v in meta.items() if k != "arguments"}
                records.append((to_json_text(data, where), "assistant", "tool_call", {**slim, MESSAGE_TEXT: "*"}))
        return records
    role, kind = _ROLE_OF_TYPE.get(mtype), "message"
    if mtype == "chat":
        role = _CHAT_ROLES.get(getattr(message, "role", ""), "user")
    if role is None:  # function messages, removals, types this adapter does not know: kept whole
        role, kind = "user", "other"
    return [_with_text(data, text if text.strip() else f"[{mtype} message]", role, kind, {KEY: key})]


def _observations(messages: Any) -> list[Observation]:
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence) or isinstance(messages, str):
        raise InvalidInputError(f"messages must be a list of LangChain messages, not {type(messages).__name__}")
    records: list[Observation] = []
    for n, m in enumerate(messages):
        where = f"message {n}"
        records.extend(check_observations(message_to_observations(m, n), lambda _, where=where: where))
    return records


# -- messages out ----------------------------------------------------------------------------------------


def _decoded(span: Span) -> dict[str, Any] | None:
    field = span.meta.get(MESSAGE_TEXT)
    if field == "*":
        return json.loads(span.text)
    data = span.meta.get(MESSAGE)
    if data is None:
        return None
    if field == "content":
        data = {**data, "data": {**data["data"], "content": span.text}}
    return data


_CLASS_OF_TYPE = {"human": HumanMessage, "ai": AIMessage, "system": SystemMessage, "tool": ToolMessage}


def _message(data: dict[str, Any]) -> BaseMessage:
    """A message back from ``message_to_dict``'s form. The four common types are rebuilt without
    validating again (the data is a validated message's dump, read back from the log: validating
    1,000 messages on every model call costs more than the rest of the view); others the usual way."""
    cls = _CLASS_OF_TYPE.get(data.get("type"))
    if cls is not None and data["data"].get("type") == data["type"]:
        return cls.model_construct(**data["data"])
    return messages_from_dict([data])[0]


def _plain(span: Span) -> BaseMessage | None:
    """A message for a span recorded without one (by the CLI, the context tools, another adapter);
    None for another tool's record of a model's reasoning, which is not sent back as text."""
    if span.kind == "thinking":
        return None
    if span.kind == "tool_result":
        return ToolMessage(content=span.text, tool_call_id=span.meta["tool_call_id"])
    return _CLASS_OF_ROLE[span.role](content=span.text)


def _args(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as the dict LangChain wants (other adapters store a JSON string)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"arguments": arguments}
    if arguments is None:
        return {}
    return arguments if isinstance(arguments, dict) else {"arguments": arguments}


def _calls_message(spans: list[Span]) -> BaseMessage:
    """The AI message of a run of live tool-call spans of one message: the original when every call is
    live, else the message with only its live calls (its text kept when its first call is live)."""
    first = spans[0]
    data = _decoded(first) if first.meta.get(CALL) == 0 else None
    if data is not None and len(spans) == first.meta.get(CALLS, 1):
        return _message(data)
    calls = [{"name": s.meta["name"], "args": _args(s.meta.get("arguments")), "id": s.meta["tool_call_id"]} for s in spans]
    if data is not None:
        kept = {c["id"] for c in calls}
        d = dict(data["data"])
        d["tool_calls"] = [c for c in d.get("tool_calls") or [] if c.get("id") in kept]
        return _message({**data, "data": d})
    return AIMessage(content="", tool_calls=calls)


def _same_message(a: Span, b: Span) -> bool:
    return a.meta.get(KEY) == b.meta.get(KEY)


def _view(session: Session) -> LiveView:
    return LiveView(session, same_turn=_same_message)


def to_messages(session: Session | LiveView, *, ids: bool = False) -> list[BaseMessage]:
    """The live buffer of ``session`` as LangChain messages: originals as they were recorded, derived
    spans as marked messages, every AI tool call answered (a placeholder names the pruned result).
    Fresh message objects on every call. ``ids=True`` starts each recorded message's text with its
    span id (``[o17] ...``), for a model that edits its context with the context tools."""
    view = session if isinstance(session, LiveView) else _view(session)
    out: list[BaseMessage] = []
    run: list[Span] = []

    def flush() -> None:
        if run:
            out.append(_calls_message(run))
            run.clear()

    for e in view.entries()[0]:
        s = e.span
        if e.shown is Shown.SPAN and s.kind == "tool_call":
            if run and run[-1].meta.get(KEY) != s.meta.get(KEY):
                flush()
            run.append(s)
            continue
        flush()
        message = _entry_message(e)
        if message is None:
            continue
        if ids and e.shown is Shown.SPAN and isinstance(message.content, str):
            message.content = f"[{s.id}] {message.content}"
        out.append(message)
    flush()
    return out


def _entry_message(e: Entry) -> BaseMessage | None:
    s = e.span
    if e.shown is Shown.SPAN:
        data = _decoded(s)
        return _message(data) if data is not None else _plain(s)
    if e.shown is Shown.DERIVED:
        return _CLASS_OF_ROLE.get(s.role, HumanMessage)(content=f"{derived_marker(s)}\n{s.text}", id=f"ctxledger-{s.id}")
    if e.shown is Shown.MISSING_RESULT:
        return ToolMessage(content=e.text, tool_call_id=s.meta["tool_call_id"], name=s.meta["name"])
    return HumanMessage(content=e.text)  # a result whose call is not live, or a lone call


# -- writing --------------------------------------------------------------------------------------------


def _write(session: Session, records: list[Observation]) -> list[Span]:
    """Observe checked records (``_observations``) in one transaction."""
    if not records:
        return []
    try:
        return write_observations(session, records, BY)
    except ConcurrencyError:  # another writer appended first: catch up, then write ours
        with contextlib.suppress(InvalidInputError):
            session.refresh()
        return write_observations(session, records, BY)


def _prune_all(session: Session, reason: str) -> None:
    with session.batch():
        for span in session.spans():
            session.prune(span.id, by=BY, reason=reason)


def _session(ledger: Ledger, session: Session | str) -> Session:
    if not isinstance(ledger, Ledger):
        raise InvalidInputError(f"ledger must be a Ledger, not {type(ledger).__name__}")
    if isinstance(session, Session):
        return session
    if isinstance(session, str):
        return open_session(ledger, session)
    raise InvalidInputError(f"session must be a Session or a session name, not {type(session).__name__}")


# -- the agent middleware -----------------------------------------------------------------------------------


class _Tracked:
    """One ledger session the middleware records into: its view, and the keys of what it holds."""

    def __init__(self, session: Session):
        self.session = session
        self.view = _view(session)
        self._known: set[str] | None = None
        self.tools: Any = None  # the session's ContextTools, made on first use

    def known(self) -> set[str]:
        """Keys of every message this session ever recorded, pruned ones included (one scan of the
        log, the first time)."""
        if self._known is None:
            self._known = {ev.meta[KEY] for ev in self.session.events() if type(ev) is Observed and KEY in ev.meta}
        return self._known


class LedgerMiddleware(AgentMiddleware):
    """Records every new message of the agent's state in a ledger session and shows the model the
    ledger's live buffer instead of the raw state.

    ``session`` is a ``Session``, a session name (created when missing), or a function of the run's
    config returning a name, for one session per LangGraph thread:
    ``LedgerMiddleware(ledger, lambda config: config["configurable"]["thread_id"])``.

    Before each model call: the state's messages not recorded yet are observed (a message is known by
    its id, so one recorded earlier, even if pruned since, is never recorded twice), the ``compactor``
    (if any) runs one step, and the model is called with the live buffer. After the agent finishes,
    the messages of its last step are recorded too. The graph state itself is never changed.

    ``context_tools=True`` registers the model's context tools (``engine.tools``: list, search,
    recall, restore, prune, summarize, re-derive) with the agent, acting on the session with
    ``budget`` shown and edits recorded ``by``; the view then tags each message with its span id
    (``render_ids``, on by default with the tools). The view is rebuilt before every model call, so an
    edit shapes the very next call."""

    def __init__(
        self,
        ledger: Ledger,
        session: Session | str | Callable[[dict], str],
        compactor: Compactor | None = None,
        *,
        context_tools: bool = False,
        budget: int | None = None,
        by: str = "model",
        render_ids: bool | None = None,
    ):
        super().__init__()
        if compactor is not None and not callable(getattr(compactor, "step", None)):
            raise InvalidInputError(f"compactor must be a Compactor, not {type(compactor).__name__}")
        for what, flag in (("context_tools", context_tools), ("render_ids", render_ids)):
            if flag is not None and not isinstance(flag, bool):
                raise InvalidInputError(f"{what} must be a bool, not {type(flag).__name__}")
        self.ledger = ledger
        self.compactor = compactor
        self.render_ids = context_tools if render_ids is None else render_ids
        self._budget, self._by = budget, by
        self.last_compaction: StepResult | None = None
        self._name_of: Callable[[dict], str] | None = None
        self._tracked: dict[str, _Tracked] = {}
        self._fixed: _Tracked | None = None
        if callable(session) and not isinstance(session, (Session, str)):
            if not isinstance(ledger, Ledger):
                raise InvalidInputError(f"ledger must be a Ledger, not {type(ledger).__name__}")
            self._name_of = session
        else:
            self._fixed = _Tracked(_session(ledger, session))
        self.tools = _context_tools(self) if context_tools else []

    @property
    def ledger_session(self) -> Session:
        """The session recorded into (for a per-thread middleware: the current run's)."""
        return self._current().session

    def _current(self) -> _Tracked:
        if self._fixed is not None:
            return self._fixed
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            raise InvalidInputError("a per-thread LedgerMiddleware names its session only inside a run") from None
        name = self._name_of(config)
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"the session function must return a session name (a non-empty str), not {name!r}")
        tracked = self._tracked.get(name)
        if tracked is None:
            tracked = self._tracked[name] = _Tracked(open_session(self.ledger, name))
        return tracked

    def record(self, messages: Sequence[BaseMessage]) -> list[Span]:
        """Observe the messages not recorded yet; returns the new spans."""
        return self._record(self._current(), messages)

    def _record(self, tracked: _Tracked, messages: Sequence[BaseMessage]) -> list[Span]:
        known = tracked.known()
        new = [m for m in messages if not (isinstance(m, BaseMessage) and isinstance(m.id, str) and m.id in known)]
        records = [r for r in _observations(new) if r[3][KEY] not in known]
        spans = _write(tracked.session, records)
        known.update(r[3][KEY] for r in records)
        live.recorded(tracked.session)  # OpenTelemetry live export (engine.otel.live): a no-op unless enabled
        return spans

    def model_view(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Record ``messages`` (the state's), compact, and return what the model is to see."""
        tracked = self._current()
        self._record(tracked, messages)
        if self.compactor is not None:
            self.last_compaction = self.compactor.step(tracked.session)
        return to_messages(tracked.view, ids=self.render_ids)

    def call_context_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one context tool on the current session (what the registered tools do)."""
        tracked = self._current()
        if tracked.tools is None:
            from engine.tools import ContextTools

            tracked.tools = ContextTools(tracked.session, budget=self._budget, by=self._by, ledger=self.ledger)
        return tracked.tools.call(name, arguments).text

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(messages=self.model_view(request.messages)))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request.override(messages=self.model_view(request.messages)))

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.record(state["messages"])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        self.record(state["messages"])
        return None


def _context_tools(middleware: LedgerMiddleware) -> list[Any]:
    """The context tools (``engine.tools``) as LangChain tools that act on the middleware's session."""
    from langchain_core.tools import StructuredTool

    from engine.tools import ContextTools

    def tool(spec: dict[str, Any]) -> Any:
        name = spec["function"]["name"]

        def run(**arguments: Any) -> str:
            return middleware.call_context_tool(name, arguments)

        return StructuredTool(
            name=name,
            description=spec["function"]["description"],
            args_schema=spec["function"]["parameters"],
            func=run,
        )

    if middleware._fixed is not None:
        tracked = middleware._fixed
        tracked.tools = ContextTools(tracked.session, budget=middleware._budget, by=middleware._by, ledger=middleware.ledger)
        specs = tracked.tools.schemas("openai")
    else:  # sessions come with the runs; the definitions are the same for every session
        with Ledger.open("memory://") as scratch:
            specs = ContextTools(scratch.create_session("schemas")).schemas("openai")
    return [tool(spec) for spec in specs]


# -- the chat message history -------------------------------------------------------------------------------


class LedgerChatMessageHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` over the session named ``session_name`` (created when missing):
    ``messages`` is the live buffer as LangChain messages, ``add_messages`` observes (all or nothing),
    ``clear`` prunes every live span (the log keeps them; nothing is deleted)."""

    def __init__(self, ledger: Ledger, session_name: Session | str):
        self.ledger = ledger
        self.ledger_session = _session(ledger, session_name)
        self._view = _view(self.ledger_session)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return to_messages(self._view)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        _write(self.ledger_session, _observations(list(messages) if isinstance(messages, tuple) else messages))

    def clear(self) -> None:
        _prune_all(self.ledger_session, "clear: the chat history was cleared")

    # The base class runs these in a thread pool; the ledger session is used from its own thread.
    async def aget_messages(self) -> list[BaseMessage]:
        return self.messages

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.add_messages(messages)

    async def aclear(self) -> None:
        self.clear()
