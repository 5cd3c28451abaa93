"""A session's log as OpenTelemetry spans: a fold over its events, one turn at a time.

A *turn* is what happened from just after one model call to the end of the next: the observations
the call's request added, every compaction, prune, restore and expansion on the way, and the call
itself. Each turn is one trace. Its root span is the model call (an inference span,
``chat {model}``), or ``ctxledger.edits`` when no call closed the turn (a session driven without a
model, or the edits after the last call). Compactions (rewrite, rederive, provider compaction,
refusal) are child spans of their turn; prunes, restores, expansions and marks are span events on
the root. Ids come from the session and the turn's first position (``engine.otel.ids``), so the same
log always maps to the same spans.

A model call is one assistant message: consecutive assistant-role observations of one message
(``meta["msg"]``/``part``/``parts`` from the proxy and the ``messages`` importer, ``message_id``
from Claude Code; anything else: consecutive assistant observations). A proxied call that got no
reply (the proxy's ``proxy:upstream-error`` mark) is an inference span with ``error.type``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from engine.events import (
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    SessionStarted,
)
from engine.otel import attributes as A
from engine.otel.calls import call_attributes
from engine.otel.ids import span_id as make_span_id
from engine.otel.ids import trace_id as make_trace_id
from engine.otel.times import event_ns
from engine.spans import id_ranges

__all__ = ["Fold", "Mapper", "UPSTREAM_ERROR_LABEL", "SCOPE", "ends_turn", "finding_attributes"]

UPSTREAM_ERROR_LABEL = "proxy:upstream-error"  # the proxy's mark for a call that got no reply
SCOPE = InstrumentationScope(A.SCOPE, A.SCOPE_VERSION)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_TIME = 1 << 63
_MAX_TEXT = 8192  # characters of one reason/explanation kept on a span


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Fold:
    """The part of the live buffer the mapping needs: each live span's tokens (and every span's,
    for restores), the live total, and how many live spans are derived."""

    __slots__ = ("live", "seen", "tokens", "derived", "lookup")

    def __init__(self, lookup: Callable[[int], Any] | None = None) -> None:
        self.live: dict[str, int] = {}
        self.seen: dict[str, int] = {}
        self.tokens = 0
        self.derived = 0
        self.lookup = lookup  # position -> event: a span's tokens when it was pruned before the fold began

    @classmethod
    def from_spans(cls, spans: Iterable[Any], lookup: Callable[[int], Any] | None = None) -> Fold:
        """The fold of a buffer as it stands (a live exporter starting mid-session)."""
        fold = cls(lookup)
        for span in spans:
            fold._add(span.id, span.tokens)
        return fold

    def tokens_of(self, span_id: str, content_position: int) -> int:
        """The tokens of a span that is not live (a restore or an expansion brings it back)."""
        tokens = self.seen.get(span_id)
        if tokens is None and self.lookup is not None and content_position:
            tokens = getattr(self.lookup(content_position), "tokens", 0)
        return tokens or 0

    def _add(self, span_id: str, tokens: int) -> None:
        if span_id not in self.live:
            self.live[span_id] = tokens
            self.tokens += tokens
            if span_id[:1] == "d":
                self.derived += 1
        if self.lookup is None:  # with a lookup, a span that left the buffer is read back when it returns
            self.seen[span_id] = tokens

    def _remove(self, span_id: str) -> int:
        tokens = self.live.pop(span_id, None)
        if tokens is None:
            return 0
        self.tokens -= tokens
        if span_id[:1] == "d":
            self.derived -= 1
        return tokens

    def apply(self, ev: Any) -> None:
        t = type(ev)
        if t is Observed:
            self._add(ev.span_id, ev.tokens)
        elif t is Pruned:
            self._remove(ev.span_id)
        elif t is Rewritten:
            for i in ev.inputs:
                self._remove(i)
            self._add(ev.span_id, ev.tokens)
        elif t is Rederived:
            self._remove(ev.span_id)
            self._add(ev.span_id, ev.tokens)
        elif t is Restored:
            self._add(ev.span_id, self.tokens_of(ev.span_id, ev.content_position))
        elif t is Expanded:
            self._remove(ev.span_id)
            for i, p in zip(ev.restored, ev.restored_positions or (0,) * len(ev.restored)):
                self._add(i, self.tokens_of(i, p))

    def inputs_tokens(self, ids: Iterable[str]) -> int:
        live = self.live
        return sum(live.get(i, 0) for i in ids)


def _message_key(ev: Observed) -> Any:
    meta = ev.meta
    return meta.get("message_id") or meta.get("msg")


def _is_call_part(ev: Any) -> bool:
    return type(ev) is Observed and ev.role == "assistant" and not ev.meta.get("resent")


def _last_part(ev: Observed) -> bool:
    part, parts = ev.meta.get("part"), ev.meta.get("parts")
    return type(part) is int and type(parts) is int and part >= parts - 1


def ends_turn(ev: Any, following: Any | None) -> bool:
    """Whether a turn ends with ``ev`` (given the event after it, if any): the last part of a model
    call, or a proxied call that got no reply. Used to find where a turn starts when export begins
    mid-session (``engine.otel.live``); the mapper applies the same rule as it folds."""
    if type(ev) is Marked:
        return ev.label == UPSTREAM_ERROR_LABEL
    if not _is_call_part(ev):
        return False
    if _last_part(ev) or following is None:
        return True
    return not (_is_call_part(following) and _continues(ev, following))


def _continues(last: Observed, ev: Observed) -> bool:
    """Whether ``ev`` is another part of the message ``last`` belongs to."""
    key, other = _message_key(last), _message_key(ev)
    if key is not None or other is not None:
        return key == other and ev.meta.get("part", 1) != 0
    return True


class _Turn:
    __slots__ = ("start", "trace", "root", "first_ns", "last_ns", "started_ns", "events", "observed", "request",
                 "group", "group_tokens", "group_derived", "failure", "inputs", "end")

    def __init__(self, session: UUID, start: int, at_ns: int):
        self.start = start
        self.end = start
        self.trace = make_trace_id(session, start)
        self.root = make_span_id(session, "turn", start)
        self.first_ns = at_ns
        self.last_ns = at_ns
        self.started_ns = at_ns
        self.events: list[SpanEvent] = []
        self.observed = 0
        self.request: dict[str, Any] = {}
        self.group: list[Observed] = []
        self.group_tokens = 0
        self.group_derived = 0
        self.failure: Marked | None = None
        self.inputs: list[str] = []  # the turn's new non-assistant texts (content capture only)


class Mapper:
    """Folds a session's events (in log order, from a turn's start) into spans.

    ``feed(event)`` returns the spans that are complete after it (a compaction's span at once, a
    turn's root when the turn ends); ``finish()`` closes the open turn. ``content=True`` adds message
    content (the convention's opt-in ``gen_ai.output.messages``, OpenInference ``input.value`` /
    ``output.value``, a summary's text as a ``compaction`` part)."""

    def __init__(self, name: str, session: UUID, *, resource: Resource | None = None, content: bool = False,
                 fold: Fold | None = None, index: bool = True):
        self.name = name
        self.session = session
        self.resource = resource or Resource.get_empty()
        self.content = content
        self.fold = fold or Fold()
        self._turn: _Turn | None = None
        self.turns: list[tuple[int, int, int, int]] = []  # (start, end, trace id, root span id)
        self.compactions: dict[int, tuple[int, int]] = {}  # position -> (trace id, span id)
        self.index = index  # keep turns and compactions (for the audit's evaluations); live export does not
        self.spans = 0
        self.turn_count = 0
        self.position = 0
        self._common = {A.CONVERSATION_ID: name, A.OI_SESSION: name}

    # -- building blocks ------------------------------------------------------------------------

    def make_span(self, name: str, trace: int, span: int, parent: int | None, start: int, end: int,
              attrs: dict[str, Any], events: Iterable[SpanEvent] = (), kind: SpanKind = SpanKind.INTERNAL,
              status: Status | None = None) -> ReadableSpan:
        self.spans += 1
        return ReadableSpan(
            name=name,
            context=SpanContext(trace, span, False, _SAMPLED),
            parent=SpanContext(trace, parent, False, _SAMPLED) if parent else None,
            resource=self.resource,
            attributes={**self._common, **attrs},
            events=tuple(events),
            kind=kind,
            status=status or Status(StatusCode.UNSET),
            start_time=start,
            end_time=max(start, end),
            instrumentation_scope=SCOPE,
        )

    def _event(self, name: str, at_ns: int, attrs: dict[str, Any]) -> SpanEvent:
        return SpanEvent(name, attrs, timestamp=at_ns, limit=None)

    # -- the fold ---------------------------------------------------------------------------------

    def feed(self, ev: Any) -> list[ReadableSpan]:
        out: list[ReadableSpan] = []
        turn = self._turn
        if turn is not None and turn.group and not (_is_call_part(ev) and _continues(turn.group[-1], ev)):
            out.append(self._close())
            turn = None
        at_ns = event_ns(ev)
        t = type(ev)
        if turn is None:
            turn = self._turn = _Turn(self.session, ev.originator_version, at_ns)
            if t is SessionStarted:  # when the session was created says nothing about its first turn's times
                turn.first_ns, turn.last_ns = _NO_TIME, 0
        position = ev.originator_version
        self.position = position
        turn.end = position
        if t is not SessionStarted:
            if at_ns > turn.last_ns:
                turn.last_ns = at_ns
            if at_ns < turn.first_ns:
                turn.first_ns = at_ns
        else:
            turn.started_ns = at_ns
        fold = self.fold
        if t is Observed:
            if _is_call_part(ev):
                if not turn.group:
                    turn.group_tokens, turn.group_derived = fold.tokens, fold.derived
                turn.group.append(ev)
                fold.apply(ev)
                if _last_part(ev):
                    out.append(self._close())
                return out
            turn.observed += 1
            request = ev.meta.get("request")
            if type(request) is dict:
                turn.request = request
            if self.content and ev.role != "system":
                turn.inputs.append(ev.text)
        elif t is Rewritten or t is Rederived or t is RewriteRefused:
            out.append(self._compaction(ev, turn, at_ns))
        elif t is Pruned:
            attrs = {A.SPAN_ID: ev.span_id, A.POSITION: position, A.TOKENS: fold.live.get(ev.span_id, 0)}
            self._who(attrs, ev)
            turn.events.append(self._event("ctxledger.prune", at_ns, attrs))
        elif t is Restored:
            attrs = {A.SPAN_ID: ev.span_id, A.POSITION: position, A.TOKENS: fold.tokens_of(ev.span_id, ev.content_position)}
            self._who(attrs, ev)
            turn.events.append(self._event("ctxledger.restore", at_ns, attrs))
        elif t is Expanded:
            attrs = {A.SPAN_ID: ev.span_id, A.POSITION: position, A.RESTORED: id_ranges(ev.restored),
                     A.TOKENS_BEFORE: fold.live.get(ev.span_id, 0), A.TOKENS_AFTER: sum(fold.tokens_of(i, p) for i, p in zip(ev.restored, ev.restored_positions or (0,) * len(ev.restored)))}
            self._who(attrs, ev)
            turn.events.append(self._event("ctxledger.expand", at_ns, attrs))
        elif t is Marked:
            if ev.label == UPSTREAM_ERROR_LABEL:
                turn.failure = ev
                turn.group_tokens, turn.group_derived = fold.tokens, fold.derived
                out.append(self._close())
                return out
            attrs = {A.LABEL: ev.label, A.POSITION: position}
            self._who(attrs, ev)
            turn.events.append(self._event("ctxledger.mark", at_ns, attrs))
        fold.apply(ev)
        return out

    def feed_all(self, events: Iterable[Any]) -> list[ReadableSpan]:
        out: list[ReadableSpan] = []
        for ev in events:
            out.extend(self.feed(ev))
        out.extend(self.finish())
        return out

    def finish(self) -> list[ReadableSpan]:
        """Close the open turn (the end of the log, or of a live exporter)."""
        return [self._close()] if self._turn is not None else []

    @staticmethod
    def _who(attrs: dict[str, Any], ev: Any) -> None:
        if ev.by:
            attrs[A.BY] = ev.by
        if ev.reason:
            attrs[A.REASON] = _clip(ev.reason)

    # -- spans --------------------------------------------------------------------------------------

    def _compaction(self, ev: Any, turn: _Turn, at_ns: int) -> ReadableSpan:
        fold = self.fold
        position = ev.originator_version
        t = type(ev)
        attrs: dict[str, Any] = {A.OI_KIND: "CHAIN", A.POSITION: position}
        self._who(attrs, ev)
        events: list[SpanEvent] = []
        status = None
        if t is RewriteRefused:
            kind = "refused"
            name = f"ctxledger.{ev.command or 'rewrite'} refused"
            attrs.update({A.COMPACTION_KIND: ev.command or "rewrite", A.REFUSED: True, A.INPUTS: id_ranges(ev.inputs),
                          A.COMMAND: ev.command or "rewrite", A.TOKENS_BEFORE: fold.inputs_tokens(ev.inputs),
                          A.BUFFER_TOKENS_BEFORE: fold.tokens, A.BUFFER_TOKENS_AFTER: fold.tokens})
            if ev.offending:
                attrs[A.OFFENDING] = id_ranges(ev.offending)
            error = "GroundingError" if ev.findings and not ev.offending else "RewritePolicyError"
            attrs[A.ERROR_TYPE] = error
            status = Status(StatusCode.ERROR, _clip(ev.reason or f"{error}: {attrs[A.INPUTS]}", 1024))
            for finding in ev.findings:
                events.append(self._event(A.EVALUATION_EVENT, at_ns, finding_attributes(finding, "ctxledger.grounding-gate")))
        else:
            if t is Rewritten:
                kind = "provider" if _provider_compaction(ev) else "rewrite"
                before = fold.inputs_tokens(ev.inputs)
                if tuple(ev.inputs) != tuple(ev.sources):
                    attrs[A.INPUTS] = id_ranges(ev.inputs)
                if ev.violation:
                    attrs[A.VIOLATION] = True
                buffer_after = fold.tokens - before + ev.tokens
            else:
                kind = "rederive"
                before = fold.live.get(ev.span_id, 0)
                buffer_after = fold.tokens - before + ev.tokens
            name = f"ctxledger.{'provider_compaction' if kind == 'provider' else kind} {ev.span_id}"
            attrs.update({
                A.COMPACTION_KIND: kind, A.SPAN_ID: ev.span_id, A.GENERATION: ev.generation,
                A.SOURCES: id_ranges(ev.sources), A.SOURCE_COUNT: len(ev.sources), A.REFUSED: False,
                A.TOKENS_BEFORE: before, A.TOKENS_AFTER: ev.tokens,
                A.BUFFER_TOKENS_BEFORE: fold.tokens, A.BUFFER_TOKENS_AFTER: buffer_after,
            })
            trigger = ev.meta.get("trigger")
            if isinstance(trigger, str) and trigger:
                attrs[A.TRIGGER] = trigger
            if self.content:
                attrs[A.OUTPUT_MESSAGES] = json.dumps(
                    [{"role": ev.role, "parts": [{"type": "compaction", "content": ev.text}]}], ensure_ascii=False)
                attrs[A.OI_OUTPUT] = ev.text
        duration = ev.meta.get("durationMs", ev.meta.get("duration_ms"))
        start = at_ns - int(duration * 1e6) if isinstance(duration, (int, float)) and not isinstance(duration, bool) and 0 <= duration < 1e9 else at_ns
        span = make_span_id(self.session, "compaction", position)
        if self.index:
            self.compactions[position] = (turn.trace, span)
        return self.make_span(name, turn.trace, span, turn.root, start, at_ns, attrs, events, status=status)

    def _close(self) -> ReadableSpan:
        turn = self._turn
        assert turn is not None
        self._turn = None
        self.turn_count += 1
        if self.index:
            self.turns.append((turn.start, turn.end, turn.trace, turn.root))
        attrs: dict[str, Any] = {A.TURN_START: turn.start, A.TURN_END: turn.end, A.OBSERVED: turn.observed}
        start, end = turn.first_ns, turn.last_ns
        if start == _NO_TIME:  # the turn held only the session's start
            start = end = turn.started_ns
        status = None
        kind = SpanKind.INTERNAL
        if turn.group or turn.failure is not None:
            kind = SpanKind.CLIENT
            first = turn.group[0] if turn.group else None
            reply = first.meta.get("reply") if first is not None else None
            reply = reply if type(reply) is dict else {}
            by = (first.by if first is not None else "") or ""
            name, call, latency = call_attributes(turn.request, reply, first.meta if first is not None else {}, by)
            attrs.update(call)
            attrs[A.OI_KIND] = "LLM"
            attrs[A.POSITION] = first.originator_version if first is not None else turn.end
            attrs[A.BUFFER_TOKENS] = turn.group_tokens
            attrs[A.BUFFER_DERIVED] = turn.group_derived
            if turn.group_derived:
                attrs[A.COMPACTED] = True  # the convention: set it when true, never false
            if latency is not None:
                start = min(start, end - int(latency * 1e6))
            if turn.failure is not None:
                reason = turn.failure.reason or "the call got no reply"
                attrs[A.ERROR_TYPE] = _error_type(reason)
                status = Status(StatusCode.ERROR, _clip(reason, 1024))
            if self.content and turn.group:
                attrs[A.OUTPUT_MESSAGES] = json.dumps([_output_message(turn.group, reply)], ensure_ascii=False)
                attrs[A.OI_OUTPUT] = "\n".join(ev.text for ev in turn.group if ev.kind == "message")
        else:
            name = "ctxledger.edits"
            attrs[A.OI_KIND] = "CHAIN"
            attrs[A.BUFFER_TOKENS] = self.fold.tokens
            attrs[A.BUFFER_DERIVED] = self.fold.derived
        if self.content and turn.inputs:
            attrs["input.value"] = _clip("\n\n".join(turn.inputs), 65536)
        attrs[A.SESSION_UUID] = str(self.session)
        return self.make_span(name, turn.trace, turn.root, None, start, end, attrs, turn.events, kind=kind, status=status)


def _provider_compaction(ev: Rewritten) -> bool:
    """A compaction the provider did (its text opaque to the client), not the agent or its harness."""
    by = ev.by or ""
    return bool(ev.meta.get("encrypted")) or by.endswith(":remote") or by.startswith("provider:")


def _error_type(reason: str) -> str:
    """``error.type`` of a call that got no reply: the HTTP status the proxy recorded, else ``_OTHER``."""
    for marker in ("HTTP ",):
        at = reason.find(marker)
        while at != -1:
            code = reason[at + len(marker): at + len(marker) + 3]
            if code.isdigit():
                return code
            at = reason.find(marker, at + 1)
    return "_OTHER"


def _output_message(group: list[Observed], reply: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for ev in group:
        if ev.kind == "tool_call":
            part: dict[str, Any] = {"type": "tool_call", "id": ev.meta.get("tool_call_id"), "name": ev.meta.get("name")}
            if "arguments" in ev.meta:
                part["arguments"] = ev.meta["arguments"]
            parts.append(part)
        elif ev.kind == "thinking":
            parts.append({"type": "reasoning", "content": ev.text})
        else:
            parts.append({"type": "text", "content": ev.text})
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    reason = reply.get("finish_reason") or reply.get("stop_reason")
    if isinstance(reason, str):
        message["finish_reason"] = reason
    return message


def finding_attributes(finding: Any, name: str) -> dict[str, Any]:
    """A grounding finding (a dict in a refusal, a ``Finding`` in an audit) as evaluation attributes."""
    get = finding.get if isinstance(finding, dict) else lambda k, d=None: getattr(finding, k, d)
    attrs: dict[str, Any] = {A.EVALUATION_NAME: f"{name}.{get('kind', 'finding')}",
                             A.EVALUATION_LABEL: str(get("severity", "") or "error")}
    message = get("message", "")
    if message:
        attrs[A.EVALUATION_EXPLANATION] = _clip(str(message), 2048)
    value = get("value", "")
    if value:
        attrs[A.FINDING_VALUE] = _clip(str(value), 1024)
    category = get("category", "")
    if category:
        attrs[A.FINDING_CATEGORY] = str(category)
    checker = get("checker", "")
    if checker:
        attrs[A.CHECKER] = str(checker)
    spans = get("span_ids", ())
    if spans:
        attrs[A.FINDING_SPANS] = id_ranges(spans)
    return attrs
