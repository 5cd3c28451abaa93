"""The model's own context tools: list, search, recall, restore, prune, summarize, re-derive.

    tools = ContextTools(session, budget=200_000, by="model:gpt-4.1")
    response = client.chat.completions.create(model=..., messages=tools.render("openai"),
                                              tools=tools.schemas("openai") + my_tools)
    result = tools.call(name, arguments)      # arguments: a dict, or the JSON string the provider sent
    result.text, result.is_error, result.data

The tools hold the model to the same rules as the API: a summary is made of live observed
generation-0 spans only (a derived input is refused and the refusal recorded), a derived span is
re-derived from its originals, nothing leaves the log. On top of that: the system prompt is not the
model's to prune, a tool call and its result leave and come back together, and the grounding gate is
on (a summary stating specifics none of its sources state is refused and recorded).

``call`` writes only the edit (or the recorded refusal). Whoever received the call from the model
records the call and its result as ``tool_call``/``tool_result`` observations and passes the call's
span (``call=``, or ``record_call=`` to record it only once the arguments are valid): every edit or
refusal event then points at it in its ``meta`` (``{"tool_call": "o301", "tool_call_position": 300}``)
and its reason ends ``[via o301]`` (see ``engine.integrations.mcp``).

Every failure is a result with ``is_error=True`` and a message the model can act on; nothing raises
for bad input from the model (a programming error in the harness still raises).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from engine.errors import (
    GroundingError,
    InvalidInputError,
    LedgerError,
    RewritePolicyError,
    SpanNotLiveError,
    SpanStateError,
    UnknownSpanError,
)
from engine.events import Expanded, Pruned, Rederived, Restored, Rewritten
from engine.render import render, span_ranges, tool_partner
from engine.session import Session
from engine.spans import Span

__all__ = ["ContextTools", "ToolResult", "TOOL_NAMES", "MAX_SUMMARY_CHARS", "MAX_REASON_CHARS", "argument_types"]

MAX_SUMMARY_CHARS = 32_000
MAX_REASON_CHARS = 1_000
MAX_IDS = 500
PREVIEW_CHARS = 80


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool call returns: ``text`` for the model, ``data`` for programs."""

    text: str
    is_error: bool = False
    data: dict[str, Any] = {}


# -- argument shapes: the single source of the JSON Schemas and of the validation ---------------------

SpanId = Annotated[str, Meta(min_length=1, max_length=32, description="A span id from the buffer tags, e.g. o17 or d3.")]
Reason = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_REASON_CHARS,
        description="Why you are making this edit, in one sentence (kept in the log for whoever audits it).",
    ),
]
Summary = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=MAX_SUMMARY_CHARS,
        description=(
            "The replacement text. State only what the source spans state: times, numbers, ids, names "
            "and quotes that none of them contains are refused."
        ),
    ),
]


class _Args(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class ListArgs(_Args):
    """List the spans in your context window (id, role, kind, provenance, generation, size, sources,
    a preview) and the token budget. Use it to decide what to prune or summarize."""

    provenance: Annotated[
        Literal["observed", "derived"] | None,
        Meta(description="Only observed spans (what really happened) or only derived ones (summaries)."),
    ] = None
    min_tokens: Annotated[int, Meta(ge=0, description="Only spans of at least this many tokens.")] = 0
    limit: Annotated[int, Meta(ge=1, le=1000, description="At most this many spans (default 50).")] = 50


class SearchArgs(_Args):
    """Search the whole log of this session, including spans that were pruned or summarized away,
    and return matching span ids with snippets. Read a hit in full with context_recall."""

    query: Annotated[str, Meta(min_length=1, max_length=500, description="Words to look for.")]
    limit: Annotated[int, Meta(ge=1, le=100, description="At most this many hits (default 10).")] = 10
    include_live: Annotated[
        bool, Meta(description="Also return spans that are in your context now (default false).")
    ] = False


class RecallArgs(_Args):
    """Read back the original text of a span from the log without changing your context: a pruned
    observation, or the original observations a summary (derived span) was made from. Long texts
    come in pages."""

    span_id: SpanId
    page: Annotated[int, Meta(ge=1, description="Page number of a long text (default 1).")] = 1


class RestoreArgs(_Args):
    """Bring pruned spans back into your context, where they were. Naming a live summary (derived
    span) replaces it by its original observations. A tool call comes back with its result."""

    span_ids: Annotated[list[SpanId], Meta(min_length=1, max_length=MAX_IDS)]
    reason: Annotated[str, Meta(max_length=MAX_REASON_CHARS, description="Why (optional).")] = ""


class PruneArgs(_Args):
    """Remove spans from your context window. Nothing is lost: the log keeps them and
    context_restore brings them back. A tool call and its result leave together. The system prompt
    cannot be pruned."""

    span_ids: Annotated[list[SpanId], Meta(min_length=1, max_length=MAX_IDS)]
    reason: Reason


class SummarizeArgs(_Args):
    """Replace observed spans (ids starting with o) by one summary written by you (a derived span).
    Summaries cannot be summarized again: to shrink a summary, prune it or re-derive it with
    context_rederive."""

    span_ids: Annotated[list[SpanId], Meta(min_length=1, max_length=MAX_IDS)]
    summary: Summary
    reason: Reason


class RederiveArgs(_Args):
    """Rewrite a summary (derived span, id starting with d) from its ORIGINAL observations: read them
    first with context_recall, then write the new summary from them, not from the old summary."""

    span_id: SpanId
    summary: Summary
    reason: Reason


_ARGS: dict[str, type[_Args]] = {
    "context_list": ListArgs,
    "context_search": SearchArgs,
    "context_recall": RecallArgs,
    "context_restore": RestoreArgs,
    "context_prune": PruneArgs,
    "context_summarize": SummarizeArgs,
    "context_rederive": RederiveArgs,
}
TOOL_NAMES: tuple[str, ...] = tuple(_ARGS)
_DECODERS = {name: msgspec.json.Decoder(cls) for name, cls in _ARGS.items()}


def argument_types() -> dict[str, type[msgspec.Struct]]:
    """Each tool's argument Struct (the source of its JSON Schema and its validation), by tool name:
    for servers that validate with their own machinery (``engine.integrations.mcp``)."""
    return dict(_ARGS)


def _schema(cls: type[_Args]) -> tuple[str, dict[str, Any]]:
    """(description, parameters) for a tool, from its argument Struct."""
    raw = msgspec.json.schema(cls)
    body = dict(raw["$defs"][cls.__name__])
    description = " ".join(body.pop("description", "").split())
    body.pop("title", None)
    props = {}
    for key, prop in body.get("properties", {}).items():
        prop = dict(prop)
        options = prop.pop("anyOf", None)
        if options:  # ``X | None = None``: an optional X
            prop.update(next(o for o in options if o.get("type") != "null"))
            prop.pop("default", None)
        props[key] = prop
    body["properties"] = props
    return description, body


_SCHEMAS = {name: _schema(cls) for name, cls in _ARGS.items()}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _preview(text: str, width: int = PREVIEW_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _ids(span_ids: Sequence[str]) -> str:
    return ", ".join(span_ids)


class ContextTools:
    """The context tools for one session, as provider tool definitions and a ``call`` dispatcher.

    ``budget`` (tokens) is shown in every listing; ``gate`` keeps the grounding gate on for
    summaries (the default: the model writes them); ``by`` names the editor in every edit event
    (``"model:gpt-4.1"``). ``recall_tokens`` caps one page of ``context_recall``. ``ledger`` is
    the Ledger the session came from: ``context_search`` then keeps its index beside the store (see
    ``engine.search_index``); without it the index is built in memory from the log at the first
    search and caught up incrementally after that.
    """

    def __init__(
        self,
        session: Session,
        *,
        budget: int | None = None,
        gate: bool = True,
        by: str = "model",
        recall_tokens: int = 2_000,
        ledger: Any = None,
    ):
        if not isinstance(session, Session):
            raise InvalidInputError(f"ContextTools needs a Session, not {type(session).__name__}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise InvalidInputError(f"budget must be a positive int of tokens or None; got {budget!r}")
        if not isinstance(gate, bool):
            raise InvalidInputError(f"gate must be a bool, not {type(gate).__name__}")
        if not isinstance(by, str) or not by.strip():
            raise InvalidInputError(f"by must be a non-empty str naming the editor; got {by!r}")
        if isinstance(recall_tokens, bool) or not isinstance(recall_tokens, int) or recall_tokens < 50:
            raise InvalidInputError(f"recall_tokens must be an int >= 50; got {recall_tokens!r}")
        self.session = session
        self.budget = budget
        self.gate = gate
        self.by = by
        self.recall_tokens = recall_tokens
        self.seen_position = session.position  # where the model last saw its buffer (see ``render``)
        self.ledger = ledger
        self._index = None
        self._handlers: dict[str, Callable[[Any, Span | None], ToolResult]] = {
            "context_list": self._list,
            "context_search": self._search,
            "context_recall": self._recall,
            "context_restore": self._restore,
            "context_prune": self._prune,
            "context_summarize": self._summarize,
            "context_rederive": self._rederive,
        }

    def __repr__(self) -> str:
        return f"<ContextTools {self.session.name!r} by={self.by!r} budget={self.budget}>"

    # -- definitions -----------------------------------------------------------------------------

    def schemas(self, format: str = "openai") -> list[dict[str, Any]]:
        """The tool definitions in a provider's native shape: ``openai`` (Chat Completions
        ``{"type": "function", "function": {...}}``), ``anthropic`` (``{"name", "description",
        "input_schema"}``) or ``mcp`` (``{"name", "description", "inputSchema"}``)."""
        out = []
        for name, (description, parameters) in _SCHEMAS.items():
            params = json.loads(_json(parameters))  # a fresh copy each time: callers may mutate
            if format == "openai":
                out.append({"type": "function", "function": {"name": name, "description": description, "parameters": params}})
            elif format == "anthropic":
                out.append({"name": name, "description": description, "input_schema": params})
            elif format == "mcp":
                out.append({"name": name, "description": description, "inputSchema": params})
            else:
                raise InvalidInputError(f"format must be 'openai', 'anthropic' or 'mcp'; got {format!r}")
        return out

    # -- dispatch --------------------------------------------------------------------------------

    def call(
        self,
        name: str,
        arguments: dict[str, Any] | str | bytes | None = None,
        *,
        call: Span | None = None,
        record_call: Callable[[], Span] | None = None,
    ) -> ToolResult:
        """Run one tool call from the model. ``arguments`` is a dict or the provider's JSON string.

        The edit events point at the call's recorded ``tool_call`` observation: pass it as ``call``
        if it is recorded already, or pass ``record_call``, a function that records it and returns
        its span: it runs only once the arguments are valid and the command is about to run, so a
        refused bad input leaves the log exactly as it was."""
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return _error(
                InvalidInputError(
                    f"there is no tool named {name!r}; the context tools are {', '.join(TOOL_NAMES)}"
                )
            )
        started: list[Span | None] = [] if call is None else [call]

        def start() -> Span | None:
            if not started:
                started.append(record_call() if record_call is not None else None)
            return started[0]

        try:
            args = self._parse(name, arguments)
            result = handler(args, start)
        except LedgerError as e:
            return _error(e)
        start()  # a read-only tool: its call is recorded once it succeeded
        return result

    def _parse(self, name: str, arguments: Any) -> Any:
        cls = _ARGS[name]
        try:
            if arguments is None or arguments == "":
                arguments = {}
            if isinstance(arguments, (str, bytes, bytearray)):
                return _DECODERS[name].decode(arguments)
            return msgspec.convert(arguments, cls, strict=True)
        except msgspec.DecodeError as e:
            if isinstance(e, msgspec.ValidationError):
                raise InvalidInputError(f"{name}: invalid arguments: {e}") from None
            raise InvalidInputError(f"{name}: the arguments are not valid JSON ({e})") from None

    @staticmethod
    def _by_call(call: Span | None) -> dict[str, Any]:
        """The edit event's meta: the recorded tool call that made the edit (span and position)."""
        if call is None:
            return {}
        return {"tool_call": call.id, "tool_call_position": call.position}

    @staticmethod
    def _reason(reason: str, call: Span | None) -> str:
        """The model's reason, ending ``[via o301]`` when a recorded call made the edit, so a plain
        ``ctxledger log`` line says which call it was (the event's meta says it too)."""
        if call is None:
            return reason
        return f"{reason} [via {call.id}]" if reason else f"[via {call.id}]"

    # -- context_list ----------------------------------------------------------------------------

    def budget_line(self) -> str:
        live = self.session.tokens
        if self.budget is None:
            return f"live {live:,} tokens"
        return f"live {live:,} / {self.budget:,} tokens ({100 * live / self.budget:.0f}%)"

    def _list(self, args: ListArgs, start: Callable[[], Span | None]) -> ToolResult:
        spans = self.session.spans()
        total = len(spans)
        if args.provenance is not None:
            spans = [s for s in spans if s.provenance.value == args.provenance]
        if args.min_tokens:
            spans = [s for s in spans if s.tokens >= args.min_tokens]
        matched = len(spans)
        shown = spans[: args.limit]
        rows, lines = [], []
        for s in shown:
            row = {
                "id": s.id,
                "role": s.role,
                "kind": s.kind,
                "provenance": s.provenance.value,
                "generation": s.generation,
                "tokens": s.tokens,
                "sources": span_ranges(s.sources) if s.sources else "",
                "preview": _preview(s.text),
            }
            if s.role == "system":
                row["protected"] = True
            rows.append(row)
            source = f" ← {row['sources']}" if s.sources else ""
            flag = " (system prompt: cannot be pruned)" if s.role == "system" else ""
            lines.append(
                f"{s.id} {s.role} {s.kind} {s.provenance.value} g{s.generation} "
                f"{_plural(s.tokens, 'token')}{source}{flag}: {row['preview']}"
            )
        head = f"{self.budget_line()} in {_plural(total, 'span')}"
        if matched < total:
            head += f"; {matched:,} match"
        tail = [f"… {matched - len(shown):,} more (raise limit or filter with min_tokens)"] if matched > len(shown) else []
        return ToolResult(
            text="\n".join([head, *lines, *tail]),
            data={
                "spans": rows,
                "live_tokens": self.session.tokens,
                "budget": self.budget,
                "live_spans": total,
                "matched": matched,
            },
        )

    # -- context_search --------------------------------------------------------------------------

    def _search(self, args: SearchArgs, start: Callable[[], Span | None]) -> ToolResult:
        if self._index is None:
            self._index = _index_for(self.ledger)
        hits = self._index.search(self.session, args.query, limit=args.limit, include_live=args.include_live)
        if not hits:
            where = "the log" if args.include_live else "the log outside your context"
            return ToolResult(text=f"no match for {args.query!r} in {where}", data={"hits": []})
        lines = [f"{_plural(len(hits), 'hit')} for {args.query!r}:"]
        for h in hits:
            lines.append(f"{h.span_id} ({h.status}, {h.role} {h.kind}, position {h.position}): {h.snippet}")
        lines.append("read one in full with context_recall; bring it back with context_restore")
        return ToolResult(text="\n".join(lines), data={"hits": [msgspec.to_builtins(h) for h in hits]})

    # -- context_recall --------------------------------------------------------------------------

    def _recall(self, args: RecallArgs, start: Callable[[], Span | None]) -> ToolResult:
        s = self.session
        span_id = args.span_id
        if span_id.startswith("o"):
            original = s.original(span_id)
            parts = [original]
            live = span_id in s.state.live
            what = f"{span_id} ({original.role} {original.kind}{', live' if live else ', not in your context'})"
        else:
            parts = s.originals(span_id)
            what = f"the {_plural(len(parts), 'original observation')} of {span_id} ({span_ranges([p.id for p in parts])})"
        body = "\n\n".join(f"[{p.id} {p.role} {p.kind}]\n{p.text}" if len(parts) > 1 else p.text for p in parts)
        pages = self._pages(body)
        if args.page > len(pages):
            raise InvalidInputError(f"{what} has {_plural(len(pages), 'page')}; page {args.page} does not exist")
        text = pages[args.page - 1]
        head = f"{what}, page {args.page} of {len(pages)}" if len(pages) > 1 else what
        more = f"\n[… page {args.page + 1} follows: context_recall with page={args.page + 1}]" if args.page < len(pages) else ""
        return ToolResult(
            text=f"{head} — read from the log, your context is unchanged:\n{text}{more}",
            data={
                "span_id": span_id,
                "spans": [p.id for p in parts],
                "page": args.page,
                "pages": len(pages),
                "text": text,
            },
        )

    def _pages(self, text: str) -> list[str]:
        """``text`` cut into pages of at most ``recall_tokens`` tokens (by the session's counter),
        each ending at a line or word break when there is one in its second half."""
        cap = self.recall_tokens
        count = self.session.counter.count
        pages, i = [], 0
        while i < len(text):
            size = cap * 4  # characters: about four per token, shrunk while the page is over the cap
            while True:
                chunk = text[i : i + size]
                if i + size < len(text):
                    cut = max(chunk.rfind("\n"), chunk.rfind(" "))
                    if cut > size // 2:
                        chunk = chunk[: cut + 1]
                tokens = count(chunk)
                if tokens <= cap or size <= 1:
                    break
                size = max(1, int(size * cap / tokens * 0.95))
            pages.append(chunk)
            i += len(chunk)
        return pages or [""]

    # -- context_restore -------------------------------------------------------------------------

    def _restore(self, args: RestoreArgs, start: Callable[[], Span | None]) -> ToolResult:
        s = self.session
        named = _unique(args.span_ids)
        plan: list[tuple[str, str]] = []  # (command, span id)
        planned: set[str] = set()
        for span_id in named:
            if span_id in planned:
                continue
            live = s.state.live.get(span_id)
            if live is not None:
                if live.derived:
                    clash = [x for x in live.sources if x in s.state.live]
                    if clash:
                        raise SpanStateError(
                            f"cannot replace {span_id} by its originals: {_ids(clash)} "
                            f"{'is' if len(clash) == 1 else 'are'} in your context already",
                            span_id=span_id,
                        )
                    plan.append(("expand", span_id))
                    planned.add(span_id)
                    continue
                if any(_partner_id(s, p) == span_id for p in named if p != span_id):
                    continue  # the live half of a pair whose other half was named
                raise SpanStateError(f"{span_id} is already in your context; nothing to restore", span_id=span_id)
            self._check_restorable(span_id)
            plan.append(("restore", span_id))
            planned.add(span_id)
        call = start()
        edit = {"reason": self._reason(args.reason, call), "by": self.by, "meta": self._by_call(call)}
        before = s.tokens
        done: list[str] = []
        expanded: dict[str, list[str]] = {}
        with s.batch():
            for command, span_id in plan:
                if command == "expand":
                    back = [b.id for b in s.expand(span_id, **edit)]
                    expanded[span_id] = back
                    for b in back:
                        done.extend(self._bring_partner(s.state.live[b], edit))
                elif span_id not in s.state.live:  # (not brought back already as a partner)
                    span = s.restore(span_id, **edit)
                    done.append(span_id)
                    done.extend(self._bring_partner(span, edit))
        parts = []
        if done:
            parts.append(f"restored {_ids(done)}")
        for d, back in expanded.items():
            parts.append(f"replaced {d} by its originals {span_ranges(back)}")
        back_in = done + [b for bs in expanded.values() for b in bs]
        return ToolResult(
            text=f"{'; '.join(parts)} — {before:,} → {s.tokens:,} live tokens. "
            f"Undo: context_prune {_json({'span_ids': back_in, 'reason': '…'})}",
            data={"restored": done, "expanded": list(expanded), "tokens_before": before, "tokens_after": s.tokens},
        )

    def _check_restorable(self, span_id: str) -> None:
        """Raise the session's own error (with its explanation) for a span restore would refuse,
        before anything is written."""
        s = self.session
        try:
            s.span(span_id)
        except SpanNotLiveError as e:
            if "pruned at position" not in e.message:
                holder = _holder(s, span_id)
                if holder is not None:
                    raise SpanStateError(
                        f"{span_id} is summarized in {holder}, which is in your context: "
                        f"context_restore {holder} replaces the summary by its originals",
                        span_id=span_id,
                    ) from None
                raise SpanStateError(e.message.replace("is not live in the buffer", "cannot be restored"), span_id=span_id) from None

    def _bring_partner(self, span: Span, edit: dict[str, Any]) -> list[str]:
        partner = tool_partner(self.session, span)
        if partner is None or partner.id in self.session.state.live:
            return []
        try:
            self._check_restorable(partner.id)
        except LedgerError:
            return []  # summarized or expanded away: the render shows a placeholder naming it
        self.session.restore(partner.id, **edit)
        return [partner.id]

    # -- context_prune ---------------------------------------------------------------------------

    def _prune(self, args: PruneArgs, start: Callable[[], Span | None]) -> ToolResult:
        s = self.session
        targets = self._live_targets(args.span_ids, "prune")
        call = start()
        before = s.tokens
        with s.batch():
            for span_id in targets:
                s.prune(span_id, reason=self._reason(args.reason, call), by=self.by, meta=self._by_call(call))
        return ToolResult(
            text=f"pruned {_ids(targets)} — {before:,} → {s.tokens:,} live tokens"
            + (f" / {self.budget:,}" if self.budget else "")
            + f". Undo: context_restore {_json({'span_ids': targets})}",
            data={"pruned": targets, "tokens_before": before, "tokens_after": s.tokens},
        )

    def _live_targets(self, span_ids: Sequence[str], verb: str) -> list[str]:
        """The named live spans plus the live other half of every named tool call or result, in
        buffer order; raises (writing nothing) for an unknown, non-live or protected span."""
        s = self.session
        chosen: dict[str, Span] = {}
        for span_id in _unique(span_ids):
            span = s.span(span_id)
            if span.role == "system":
                raise InvalidInputError(
                    f"{span_id} is the system prompt: the context tools may not {verb} it", span_id=span_id
                )
            chosen[span_id] = span
        for span in list(chosen.values()):
            partner = tool_partner(s, span)
            if partner is not None and partner.id in s.state.live:
                chosen.setdefault(partner.id, s.state.live[partner.id])
        return [sp.id for sp in sorted(chosen.values(), key=lambda sp: (sp.order, sp.id))]

    # -- context_summarize -----------------------------------------------------------------------

    def _summarize(self, args: SummarizeArgs, start: Callable[[], Span | None]) -> ToolResult:
        s = self.session
        _check_text(args.summary, "summary")
        named = _unique(args.span_ids)
        derived = [i for i in named if i in s.state.live and s.state.live[i].derived]
        if not derived:
            targets = self._live_targets(named, "summarize")
        else:
            targets = named  # the session refuses it, and records the refusal
        call = start()
        before = s.tokens
        try:
            span = s.rewrite(
                targets, args.summary, by=self.by, reason=self._reason(args.reason, call), gate=self.gate,
                meta=self._by_call(call),
            )
        except GroundingError as e:
            return _error(e, hint=_grounding_hint(e))
        except RewritePolicyError as e:
            offending = [i for i in targets if i in s.state.live and s.state.live[i].derived] or derived
            first = offending[0] if offending else "the derived span"
            return _error(
                e,
                text=(
                    f"refused and recorded: {_ids(offending)} "
                    f"{'is a summary' if len(offending) == 1 else 'are summaries'} (derived, generation 1), and a "
                    "summary of a summary drifts from what was observed, so only observed spans (o…) can be "
                    f"summarized. Two legal moves: context_prune {_json({'span_ids': offending, 'reason': '…'})} "
                    f"to drop it, or context_rederive {_json({'span_id': first, 'summary': '…', 'reason': '…'})} "
                    f"to rewrite it from its original observations (read them with context_recall {first})."
                ),
            )
        added = [t for t in targets if t not in named]
        return ToolResult(
            text=f"summarized {span_ranges(targets)} into {span.id} — {before:,} → {s.tokens:,} live tokens"
            + (f" (with {_ids(added)}, the other half of a tool pair)" if added else "")
            + f". Undo: context_restore {_json({'span_ids': [span.id]})}",
            data={"derived": span.id, "sources": list(targets), "tokens_before": before, "tokens_after": s.tokens},
        )

    # -- context_rederive ------------------------------------------------------------------------

    def _rederive(self, args: RederiveArgs, start: Callable[[], Span | None]) -> ToolResult:
        s = self.session
        _check_text(args.summary, "summary")
        span = s.span(args.span_id)
        if span.observed:
            raise SpanStateError(
                f"{span.id} is an observation, not a summary; only derived spans (d…) are re-derived "
                "(to summarize observations use context_summarize)",
                span_id=span.id,
            )
        before = span.tokens
        call = start()
        try:
            new = s.rederive(
                span.id, text=args.summary, by=self.by, reason=self._reason(args.reason, call), gate=self.gate,
                meta=self._by_call(call),
            )
        except GroundingError as e:
            return _error(e, hint=_grounding_hint(e))
        return ToolResult(
            text=f"re-derived {new.id} from {span_ranges(new.sources)} — {before:,} → {new.tokens:,} tokens; "
            f"live {s.tokens:,}. The previous text stays in the log (context_recall shows the originals).",
            data={"rederived": new.id, "sources": list(new.sources), "tokens_before": before, "tokens_after": new.tokens},
        )

    # -- what the model sees ---------------------------------------------------------------------

    def render(self, format: str = "openai", *, mark_derived: bool = True) -> Any:
        """The buffer with span ids (``render(..., ids=True)``), plus one line naming the edits made
        since the last render by anyone other than this editor (a harness compaction, a person),
        so the model is never edited silently. Marks the buffer as seen."""
        out = render(self.session.spans(), format=format, mark_derived=mark_derived, reader=self.session, ids=True)
        note = self.changes_since_seen()
        self.seen_position = self.session.position
        if note:
            out = _with_notice(out, format, note)
        return out

    def changes_since_seen(self) -> str:
        """One line about edits since ``seen_position`` not made by ``by`` ('' when there are none)."""
        s = self.session
        if s.position <= self.seen_position:
            return ""
        pruned, restored, derived, rederived, expanded, editors = [], [], [], [], [], []
        for ev in s.events(self.seen_position + 1):
            t = type(ev)
            if t not in (Pruned, Restored, Rewritten, Rederived, Expanded) or ev.by == self.by:
                continue
            if ev.by and ev.by not in editors:
                editors.append(ev.by)
            if t is Pruned:
                pruned.append(ev.span_id)
            elif t is Restored:
                restored.append(ev.span_id)
            elif t is Rewritten:
                derived.append(f"{span_ranges(ev.inputs) if all(i.startswith('o') for i in ev.inputs) else _ids(ev.inputs)} into {ev.span_id}")
            elif t is Rederived:
                rederived.append(ev.span_id)
            else:
                expanded.append(ev.span_id)
        parts = []
        if pruned:
            parts.append(f"pruned {_short_ids(pruned)}")
        if derived:
            parts.append(f"summarized {'; '.join(derived[:5])}{' …' if len(derived) > 5 else ''}")
        if rederived:
            parts.append(f"re-derived {_short_ids(rederived)}")
        if expanded:
            parts.append(f"expanded {_short_ids(expanded)}")
        if restored:
            parts.append(f"restored {_short_ids(restored)}")
        if not parts:
            return ""
        who = f" ({', '.join(editors[:3])})" if editors else ""
        return (
            f"[ledger] since you last saw it, your context was edited by the harness{who}: "
            f"{'; '.join(parts)}. context_recall reads anything back."
        )


def _index_for(ledger: Any):
    from engine.search_index import open_index

    if ledger is None:
        return open_index(None)
    return open_index(ledger.url, encrypted=_encrypted(ledger))


def _encrypted(ledger: Any) -> bool:
    """Whether the store encrypts its events (its text must not be indexed in plaintext beside it)."""
    return bool(getattr(ledger, "encrypted", True))  # a ledger-like object that cannot say: assume so


def _short_ids(ids: list[str], most: int = 12) -> str:
    if all(i.startswith("o") for i in ids):
        return span_ranges(ids) if len(ids) <= most else f"{len(ids)} spans ({span_ranges(ids[:most])} …)"
    return _ids(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _with_notice(out: Any, format: str, note: str) -> Any:
    if format == "text":
        return f"{note}\n\n{out}" if out else note
    if format == "openai":
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{note}"}
        else:
            out.insert(0, {"role": "system", "content": note})
        return out
    out["system"] = f"{out['system']}\n\n{note}" if out["system"] else note
    return out


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _unique(span_ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(span_ids))


def _partner_id(session: Session, span_id: str) -> str | None:
    span = session.state.live.get(span_id)
    if span is None:
        try:
            span = session.original(span_id) if span_id.startswith("o") else None
        except LedgerError:
            return None
    if span is None:
        return None
    partner = tool_partner(session, span)
    return partner.id if partner is not None else None


def _holder(session: Session, span_id: str) -> str | None:
    for s in session.state.live.values():
        if s.derived and span_id in s.sources:
            return s.id
    return None


def _check_text(text: str, what: str) -> None:
    if not text.strip():
        raise InvalidInputError(f"the {what} is empty (only whitespace)")


def _grounding_hint(e: GroundingError) -> str:
    return (
        " Write the summary again with only what the source spans state (read them with context_recall), "
        "or leave those details out."
    )


def _error(e: LedgerError, *, text: str | None = None, hint: str = "") -> ToolResult:
    data: dict[str, Any] = {"error": type(e).__name__, "message": e.message}
    if e.span_id:
        data["span_id"] = e.span_id
    if isinstance(e, GroundingError):
        data["findings"] = [msgspec.to_builtins(f) for f in e.findings]
    if isinstance(e, UnknownSpanError) and "does not exist" in e.message:
        hint = hint or " context_list shows the spans in your context."
    return ToolResult(text=(text or f"error: {e.message}.{hint}").replace("..", "."), is_error=True, data=data)
