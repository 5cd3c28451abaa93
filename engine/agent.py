"""A small agent loop that lets the model edit its own context through the ledger.

Each step renders the session with span ids (``render(..., ids=True)``) in the model's format,
offers the context tools (``engine.tools.ContextTools``) beside the caller's own tools, and then:

- records what the model said and every tool call it made as observations (``tool_call`` spans);
- executes each ``context_*`` call against the ledger with ``ContextTools.call(..., call=span)`` and
  records its result as a ``tool_result`` observation — the edit events the call caused point at the
  call's span (``meta`` of a summary, ``[via o17]`` in the reason of a prune), so ``ctxledger log``
  and ``blame`` can say "the model pruned o17 because …";
- runs the caller's tools registered as Python callables, and hands every other tool call back
  (``AgentResult.pending``; answer with ``Agent.submit`` and call ``run()`` again);
- when the buffer passes the high-water mark, records a one-paragraph budget nudge (a user
  message from the harness, so what the model was told is in the log too) before asking the model.

Nothing here is hidden from the log: every message the model sees is a span of the session.

    from engine.agent import Agent, chat_model
    agent = Agent(session, chat_model("openai:gpt-4.1"), budget=200_000)
    result = agent.run("Look at the failing checkout and tell me what you find.")

Models: ``OpenAIChat`` (Chat Completions on any OpenAI-compatible server: OpenAI, vLLM, Ollama,
llama.cpp) and ``AnthropicChat`` (Messages API), over the official SDKs (extras ``openai`` and
``anthropic``, imported when a model is built). Anything with ``name``, ``format`` and
``respond(rendered, tools) -> Reply`` is a model too (the demo's simulated editor is one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from engine.errors import InvalidInputError, RewriterError
from engine.sdk import anthropic_client, check_connection, openai_client

if TYPE_CHECKING:
    from engine.session import Session
    from engine.spans import Span

__all__ = [
    "Agent",
    "AgentResult",
    "ChatModel",
    "OpenAIChat",
    "AnthropicChat",
    "Reply",
    "ToolCall",
    "chat_model",
    "NUDGE_META",
    "CONTEXT_PREFIX",
]

CONTEXT_PREFIX = "context_"
NUDGE_META = "budget-nudge"  # meta["ctxledger"] of a recorded budget nudge
HARNESS = "ctxledger.agent"
MAX_ARGUMENT_CHARS = 128 * 1024  # larger tool-call arguments are kept in the span text only


# -- what a model returns ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply. ``arguments`` as the provider sent it (a JSON string or a dict)."""

    id: str
    name: str
    arguments: str | dict[str, Any] = "{}"

    def args(self) -> dict[str, Any] | None:
        """The arguments as a dict, or None when they are not a JSON object."""
        a = self.arguments
        if isinstance(a, dict):
            return a
        try:
            a = json.loads(a or "{}")
        except (TypeError, ValueError):
            return None
        return a if isinstance(a, dict) else None


@dataclass(frozen=True)
class Reply:
    """What the model said (``text``) and the tools it called, in order."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@runtime_checkable
class ChatModel(Protocol):
    """A model the loop can drive: ``format`` is the render format it reads ("openai" or
    "anthropic"); ``respond`` gets the rendered buffer and the tool definitions in that format."""

    name: str
    format: str

    def respond(self, rendered: Any, tools: list[dict[str, Any]]) -> Reply: ...


# -- the SDK-backed models -------------------------------------------------------------------------------


class _SDKChat:
    format = ""
    _extra = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_tokens: int = 2048,
        temperature: float | None = None,
        client: Any = None,
    ):
        check_connection(model, timeout, max_retries, "a chat model")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInputError(f"max_tokens must be a positive int; got {max_tokens!r}")
        self.model = model
        self.base_url = base_url
        self.name = f"{self.format}:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.calls = 0
        self.client = client if client is not None else self._make_client(api_key, float(timeout), max_retries)

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"{type(self).__name__}({self.model!r}{where})"

    def _make_client(self, api_key: str | None, timeout: float, max_retries: int) -> Any:
        raise NotImplementedError

    def respond(self, rendered: Any, tools: list[dict[str, Any]]) -> Reply:
        self.calls += 1
        try:
            return self._respond(rendered, tools)
        except RewriterError:
            raise
        except Exception as e:
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise RewriterError(f"{self.name} failed: {type(e).__name__}: {first}; nothing was recorded for this step") from e

    def _respond(self, rendered: Any, tools: list[dict[str, Any]]) -> Reply:
        raise NotImplementedError


class OpenAIChat(_SDKChat):
    """Chat Completions with tools on any OpenAI-compatible server (``base_url`` for vLLM, Ollama…).
    ``max_tokens_param``: ``max_tokens`` (local servers) or ``max_completion_tokens`` (newer OpenAI
    models)."""

    format = "openai"
    _extra = "openai"

    def __init__(self, model: str, *, max_tokens_param: str = "max_tokens", **kw: Any):
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise InvalidInputError("max_tokens_param must be max_tokens or max_completion_tokens")
        self.max_tokens_param = max_tokens_param
        super().__init__(model, **kw)

    def _make_client(self, api_key, timeout, max_retries):
        return openai_client(
            base_url=self.base_url, key=api_key, timeout=timeout, max_retries=max_retries,
            error=RewriterError, who=type(self).__name__,
        )

    def _respond(self, rendered, tools):
        kw: dict[str, Any] = {self.max_tokens_param: self.max_tokens}
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        completion = self.client.chat.completions.create(model=self.model, messages=rendered, **kw)
        choices = getattr(completion, "choices", None)
        if not choices:
            raise RewriterError(f"{self.name} returned a response without choices; nothing was recorded for this step")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise RewriterError(f"{self.name} returned a choice without a message; nothing was recorded for this step")
        text = getattr(message, "content", None) or ""
        calls = []
        for c in getattr(message, "tool_calls", None) or ():
            fn = getattr(c, "function", None)
            if fn is None or not getattr(c, "id", None) or not getattr(fn, "name", None):
                raise RewriterError(f"{self.name} returned a malformed tool call; nothing was recorded for this step")
            calls.append(ToolCall(c.id, fn.name, fn.arguments if fn.arguments is not None else "{}"))
        if not isinstance(text, str):
            raise RewriterError(f"{self.name} returned non-text content; nothing was recorded for this step")
        return Reply(text=text, tool_calls=tuple(calls))


class AnthropicChat(_SDKChat):
    """The Anthropic Messages API with tools (``base_url`` for a proxy or gateway)."""

    format = "anthropic"
    _extra = "anthropic"

    def _make_client(self, api_key, timeout, max_retries):
        return anthropic_client(
            base_url=self.base_url, key=api_key, timeout=timeout, max_retries=max_retries,
            error=RewriterError, who=type(self).__name__,
        )

    def _respond(self, rendered, tools):
        kw: dict[str, Any] = {}
        if rendered.get("system"):
            kw["system"] = rendered["system"]
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["extra_body"] = {"temperature": self.temperature}
        message = self.client.messages.create(
            model=self.model, max_tokens=self.max_tokens, messages=rendered["messages"], **kw
        )
        blocks = getattr(message, "content", None)
        if not isinstance(blocks, list):
            raise RewriterError(f"{self.name} returned a response without content; nothing was recorded for this step")
        texts, calls = [], []
        for b in blocks:
            kind = getattr(b, "type", None)
            if kind == "text" and isinstance(getattr(b, "text", None), str):
                texts.append(b.text)
            elif kind == "tool_use":
                if not getattr(b, "id", None) or not getattr(b, "name", None):
                    raise RewriterError(f"{self.name} returned a malformed tool_use block; nothing was recorded for this step")
                calls.append(ToolCall(b.id, b.name, dict(getattr(b, "input", None) or {})))
        return Reply(text="".join(texts), tool_calls=tuple(calls))


def chat_model(spec: str, *, base_url: str | None = None, **kw: Any) -> OpenAIChat | AnthropicChat:
    """``"openai:gpt-4.1"`` or ``"anthropic:claude-sonnet-4-5"`` -> a model for ``Agent``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise InvalidInputError(f"a model is named provider:NAME (openai:NAME or anthropic:NAME); got {spec!r}")
    provider, _, name = spec.partition(":")
    if provider == "openai":
        return OpenAIChat(name, base_url=base_url, **kw)
    if provider == "anthropic":
        return AnthropicChat(name, base_url=base_url, **kw)
    raise InvalidInputError(f"unknown model provider {provider!r}: use openai:NAME or anthropic:NAME")


# -- the loop ---------------------------------------------------------------------------------------------


@dataclass
class ContextCall:
    """One ``context_*`` call the loop executed: the call, its result, and the spans recording them."""

    call: ToolCall
    text: str
    is_error: bool
    data: Any
    call_span: str
    result_span: str


@dataclass
class AgentResult:
    """How a ``run()`` ended. ``stopped``: ``"answered"`` (the model replied without tool calls),
    ``"tool_calls"`` (calls for the caller are in ``pending``), or ``"max_steps"``."""

    stopped: str
    text: str = ""
    steps: int = 0
    nudges: int = 0
    pending: list[ToolCall] = field(default_factory=list)
    context_calls: list[ContextCall] = field(default_factory=list)
    function_calls: list[ToolCall] = field(default_factory=list)


class Agent:
    """Drive ``model`` over ``session``: see the module docstring.

    ``tools``: the caller's tool definitions, in the model's format (OpenAI ``{"type": "function",
    ...}`` or Anthropic ``{"name", "input_schema", ...}``); ``functions``: Python callables for some
    of them, called with the arguments as keywords (their return value, as text or JSON, is the
    result). ``budget`` (tokens) enables the nudge above ``high_water``; ``gate`` is the grounding
    gate of model-written summaries (on by default). ``by`` names the editor in every event
    (default ``model:<provider>:<name>``)."""

    def __init__(
        self,
        session: Session,
        model: ChatModel,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        functions: Mapping[str, Callable[..., Any]] | None = None,
        budget: int | None = None,
        high_water: float = 0.70,
        low_water: float = 0.50,
        gate: bool = True,
        by: str | None = None,
        max_steps: int = 16,
        context_tools: Any = None,
    ):
        if not isinstance(model, ChatModel):
            raise InvalidInputError("model must have name, format and respond(rendered, tools)")
        if model.format not in ("openai", "anthropic"):
            raise InvalidInputError(f"model.format must be 'openai' or 'anthropic'; got {model.format!r}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise InvalidInputError(f"budget must be a positive int or None; got {budget!r}")
        for what, v in (("high_water", high_water), ("low_water", low_water)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise InvalidInputError(f"{what} must be in (0, 1]; got {v!r}")
        if low_water > high_water:
            raise InvalidInputError("low_water must not exceed high_water")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise InvalidInputError(f"max_steps must be a positive int; got {max_steps!r}")
        self.session = session
        self.model = model
        self.budget = budget
        self.high_water = float(high_water)
        self.low_water = float(low_water)
        self.max_steps = max_steps
        self.by = by or f"model:{model.name}"
        if context_tools is None:
            from engine.tools import ContextTools

            context_tools = ContextTools(session, budget=budget, gate=gate, by=self.by)
        self.context_tools = context_tools
        self.user_tools = [dict(t) for t in tools]
        names = [_tool_name(t) for t in self.user_tools]
        clash = [n for n in names if n.startswith(CONTEXT_PREFIX)]
        if clash:
            raise InvalidInputError(f"tool names starting with {CONTEXT_PREFIX!r} are the ledger's: {', '.join(clash)}")
        self.functions = dict(functions or {})
        unknown = [n for n in self.functions if n not in names]
        if unknown:
            raise InvalidInputError(f"functions for tools that are not in tools: {', '.join(unknown)}")
        self._schemas = list(context_tools.schemas(format=model.format)) + self.user_tools
        self._nudged = False
        self._pending: dict[str, ToolCall] = {}

    def __repr__(self) -> str:
        return f"<Agent {self.model.name} on {self.session.name!r}>"

    @property
    def high_tokens(self) -> int | None:
        return None if self.budget is None else int(self.budget * self.high_water)

    # -- public -------------------------------------------------------------------------------

    def run(self, message: str | None = None, *, role: str = "user") -> AgentResult:
        """Record ``message`` (if any), then let the model work until it answers, calls a tool
        the caller must run, or ``max_steps`` model calls were made."""
        if self._pending:
            waiting = ", ".join(sorted(self._pending))
            raise InvalidInputError(f"tool calls {waiting} wait for their results: submit() them first")
        if message is not None:
            self.session.observe(message, role=role, by=HARNESS if role == "system" else "")
        result = AgentResult(stopped="max_steps")
        self._nudged = False
        for _ in range(self.max_steps):
            self._maybe_nudge(result)
            rendered = self.context_tools.render(self.model.format)
            reply = self.model.respond(rendered, self._schemas)
            result.steps += 1
            if not isinstance(reply, Reply):
                raise RewriterError(f"{self.model.name} returned {type(reply).__name__}, not a Reply")
            self._record_reply(reply)
            if not reply.tool_calls:
                result.stopped, result.text = "answered", reply.text
                return result
            for call in reply.tool_calls:
                if call.name.startswith(CONTEXT_PREFIX):
                    result.context_calls.append(self._context_call(call))
                elif call.name in self.functions:
                    self._function_call(call)
                    result.function_calls.append(call)
                else:
                    self._pending[call.id] = call
            if self._pending:
                result.stopped = "tool_calls"
                result.pending = list(self._pending.values())
                return result
        return result

    def submit(self, call_id: str, output: Any, *, is_error: bool = False) -> None:
        """Record the result of a tool call that ``run()`` handed back."""
        call = self._pending.get(call_id)
        if call is None:
            raise InvalidInputError(f"no tool call {call_id!r} is waiting for a result")
        self._record_result(call, _as_text(output), is_error=is_error)
        del self._pending[call_id]

    # -- steps --------------------------------------------------------------------------------

    def _maybe_nudge(self, result: AgentResult) -> None:
        high = self.high_tokens
        if high is None:
            return
        tokens = self.session.tokens
        if tokens <= high:
            self._nudged = False
            return
        if self._nudged:
            return
        budget = self.budget
        text = (
            f"[ctxledger] Context budget: {tokens:,} of {budget:,} tokens live ({100 * tokens / budget:.0f}%), above the "
            f"{100 * self.high_water:.0f}% high-water mark. Free space with the context tools before you go on: "
            "context_prune what you no longer need, context_summarize runs of observations you still need in short, "
            f"context_rederive an oversized summary from its originals; aim for {int(budget * self.low_water):,} "
            "tokens or less. Cite spans by the ids in brackets. Your summaries are checked against their sources."
        )
        self.session.observe(text, role="user", meta={"ctxledger": NUDGE_META}, by=HARNESS)
        self._nudged = True
        result.nudges += 1

    def _record_reply(self, reply: Reply) -> None:
        s = self.session
        if reply.text.strip():
            s.observe(reply.text, role="assistant", by=self.by)
        for call in reply.tool_calls:
            if not isinstance(call, ToolCall) or not call.id or not call.name:
                raise RewriterError(f"{self.model.name} returned a malformed tool call: {call!r}")
            args = call.args()
            shown = json.dumps(args, ensure_ascii=False, separators=(", ", ": ")) if args is not None else str(call.arguments)
            kept: Any = args if args is not None else str(call.arguments)
            if len(shown) > MAX_ARGUMENT_CHARS:
                # too large to keep as structured meta: the text keeps all of it, the meta a marker
                kept = {"ctxledger": f"arguments of {len(shown):,} characters; see the span text"}
            s.observe(
                f"{call.name}({shown})",
                role="assistant",
                kind="tool_call",
                meta={"tool_call_id": call.id, "name": call.name, "arguments": kept},
                by=self.by,
            )

    def _call_span(self, call: ToolCall) -> Span | None:
        """The span recording ``call`` (the newest live tool_call span with its id)."""
        for sp in reversed(self.session.spans()):
            if sp.kind == "tool_call" and sp.meta.get("tool_call_id") == call.id:
                return sp
        return None

    def _context_call(self, call: ToolCall) -> ContextCall:
        span = self._call_span(call)
        res = self.context_tools.call(call.name, call.arguments, call=span)
        result_span = self._record_result(call, res.text or "(no output)", is_error=bool(res.is_error))
        return ContextCall(call, res.text, bool(res.is_error), res.data, span.id if span else "", result_span)

    def _function_call(self, call: ToolCall) -> None:
        fn = self.functions[call.name]
        args = call.args()
        if args is None:
            self._record_result(call, f"error: arguments of {call.name} are not a JSON object", is_error=True)
            return
        try:
            out = fn(**args)
        except Exception as e:  # the model reads the error and can try again
            self._record_result(call, f"error: {type(e).__name__}: {e}", is_error=True)
            return
        self._record_result(call, _as_text(out))

    def _record_result(self, call: ToolCall, text: str, *, is_error: bool = False) -> str:
        meta: dict[str, Any] = {"tool_call_id": call.id, "name": call.name}
        if is_error:
            meta["is_error"] = True
        by = HARNESS if call.name.startswith(CONTEXT_PREFIX) else ""
        span = self.session.observe(text if text.strip() else "(empty)", role="tool", kind="tool_result", meta=meta, by=by)
        return span.id


def _tool_name(tool: Mapping[str, Any]) -> str:
    name = tool.get("name") or (tool.get("function") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"a tool definition without a name: {dict(tool)!r}")
    return name


def _as_text(out: Any) -> str:
    if isinstance(out, str):
        return out
    try:
        return json.dumps(out, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(out)
