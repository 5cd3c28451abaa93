"""The buffer as the model sees it: plain text, OpenAI Chat Completions messages, Anthropic Messages.

Two promises hold for every buffer, whatever was pruned or rewritten:

- derived spans are marked as derived, with what they summarize, so the model can tell its own
  summaries from observations (``mark_derived=False`` turns the marker off);
- the output is valid for the provider API: every tool call is answered right after it (a result
  that is no longer live becomes a short placeholder naming the span to restore), and a live result
  whose call is gone is shown as a plain message instead of an orphan ``tool`` message.

``render(spans, ...)`` works on the live spans alone; given the ``reader`` (a session or a view) it
also names the pruned partner of a half-pruned tool pair and its size, read back from the log near
the live half (a bounded scan, never the whole log).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidInputError
from engine.events import Observed
from engine.spans import Span, ordinal

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["render", "FORMATS", "derived_marker", "span_ranges", "span_tag", "tool_partner"]

FORMATS = ("text", "openai", "anthropic")
PARTNER_SCAN_LIMIT = 512  # how far (in events) render looks for the partner of a half-pruned pair


def render(
    spans: Sequence[Span],
    *,
    format: str = "text",
    mark_derived: bool = True,
    reader: LogReader | None = None,
    ids: bool = False,
) -> str | list[dict[str, Any]] | dict[str, Any]:
    """Render live spans (in buffer order).

    ``text`` returns a str; ``openai`` a list of Chat Completions messages; ``anthropic`` a dict
    ``{"system": str, "messages": [...]}`` ready for ``client.messages.create(**rendered, ...)``.
    ``ids=True`` starts every span's text with its tag (``[o17]``, ``[d3 ← o4–o19]``, see
    ``span_tag``) so a model can name spans in its context tools; tool pairing is unchanged.
    """
    if format not in FORMATS:
        raise InvalidInputError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    if not isinstance(mark_derived, bool):
        raise InvalidInputError(f"mark_derived must be a bool, not {type(mark_derived).__name__}")
    if not isinstance(ids, bool):
        raise InvalidInputError(f"ids must be a bool, not {type(ids).__name__}")
    items = list(_items(spans, mark_derived, _Partners(reader), ids))
    if format == "text":
        return _to_text(items)
    # the model's earlier reasoning is the log's to keep, not the provider's to be sent back as text
    items = [it for it in items if not it.thinking]
    if format == "openai":
        return _to_openai(items)
    return _to_anthropic(items)


# -- markers --------------------------------------------------------------------------------------


def span_ranges(span_ids: Sequence[str]) -> str:
    """``o4 o5 o6 o9`` -> ``o4–o6, o9``."""
    nums = sorted({ordinal(s) for s in span_ids})
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(f"o{nums[i]}" if i == j else f"o{nums[i]}–o{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def derived_marker(span: Span) -> str:
    """``[derived d3 · summary of o4–o19 · generation 1 — not an observation]``; sources in more than
    three stretches are shown as their count and span (``84 spans within o2–o113``)."""
    ranges = span_ranges(span.sources)
    if ranges.count(",") > 2:
        nums = sorted(ordinal(s) for s in span.sources)
        ranges = f"{len(span.sources)} spans within o{nums[0]}–o{nums[-1]}"
    return f"[derived {span.id} · {span.kind} of {ranges} · generation {span.generation} — not an observation]"


def _source_ranges(span: Span) -> str:
    ranges = span_ranges(span.sources)
    if ranges.count(",") > 2:
        nums = sorted(ordinal(s) for s in span.sources)
        ranges = f"{len(span.sources)} spans within o{nums[0]}–o{nums[-1]}"
    return ranges


def span_tag(span: Span, *, mark_derived: bool = True) -> str:
    """The tag ``render(..., ids=True)`` puts before a span: ``[o17]`` for an observation,
    ``[d3 ← o4–o19 · derived summary, generation 1 — not an observation]`` for a derived span
    (``[d3 ← o4–o19]`` with ``mark_derived=False``). Stable: it depends on the span alone."""
    if span.observed:
        return f"[{span.id}]"
    if not mark_derived:
        return f"[{span.id} ← {_source_ranges(span)}]"
    return (
        f"[{span.id} ← {_source_ranges(span)} · derived {span.kind}, "
        f"generation {span.generation} — not an observation]"
    )


def tool_partner(reader: LogReader, span: Span) -> Span | None:
    """The other half of a tool pair: the result of a ``tool_call`` span, or the call of a
    ``tool_result`` span, as it is now (the live span if live, else as read back from the log). Found
    by a bounded scan of the log near ``span``; None for spans outside a tool exchange."""
    if not span.observed or span.kind not in ("tool_call", "tool_result"):
        return None
    partners = _Partners(reader)
    ev = partners.result_of(span) if span.kind == "tool_call" else partners.call_of(span)
    if ev is None:
        return None
    from projections.buffer import span_from_event  # engine's package init loads this module early

    return reader.state.live.get(ev.span_id) or span_from_event(ev)


def _tokens(n: int) -> str:
    return f"{n:,} tokens" if n != 1 else "1 token"


# -- the intermediate form: one item per rendered unit ----------------------------------------------


class _Item:
    """A message-level unit: plain text of a role, or a tool exchange (calls + their answers)."""

    __slots__ = ("role", "text", "calls", "answers", "thinking")

    def __init__(
        self, role: str, text: str = "", calls: list[dict] | None = None, answers: list[dict] | None = None, thinking: bool = False
    ):
        self.role = role
        self.text = text
        self.thinking = thinking
        self.calls = calls or []  # {"id", "name", "arguments", "text", "span"}
        self.answers = answers or []  # {"id", "text", "span"}


class _Partners:
    """Finds the other half of a half-live tool pair in the log, near the live half."""

    def __init__(self, reader: LogReader | None):
        self.reader = reader
        self._holders: dict[str, str] | None = None

    def _windows(self, start: int, stop: int, backward: bool) -> Iterator[list[Observed]]:
        """Observed events of ``start..stop`` in growing windows (8, 64, 512 events) from the end
        nearest the live half: the partner is almost always a few events away."""
        done, size = 0, 8
        total = stop - start + 1
        while done < total:
            n = min(size, total - done)
            lo, hi = (stop - done - n + 1, stop - done) if backward else (start + done, start + done + n - 1)
            window = [ev for ev in self.reader.events(lo, hi) if type(ev) is Observed]
            yield window[::-1] if backward else window
            done += n
            size *= 8

    def result_of(self, call: Span) -> Observed | None:
        if self.reader is None or not call.position:
            return None
        stop = min(self.reader.position, call.position + PARTNER_SCAN_LIMIT)
        want = call.meta.get("tool_call_id")
        for window in self._windows(call.position + 1, stop, backward=False):
            for ev in window:
                if ev.kind == "tool_result" and ev.meta.get("tool_call_id") == want:
                    return ev
        return None

    def call_of(self, result: Span) -> Observed | None:
        if self.reader is None or not result.position:
            return None
        want = result.meta.get("tool_call_id")
        start = max(1, result.position - PARTNER_SCAN_LIMIT)
        for window in self._windows(start, result.position - 1, backward=True):
            for ev in window:
                if ev.kind == "tool_call" and ev.meta.get("tool_call_id") == want:
                    return ev
        return None

    def summarized_in(self, span_id: str) -> str | None:
        if self.reader is None:
            return None
        if self._holders is None:
            self._holders = {src: s.id for s in self.reader.state.live.values() for src in s.sources}
        return self._holders.get(span_id)


def _missing_result_text(call: Span, partners: _Partners) -> str:
    ev = partners.result_of(call)
    if ev is None:
        if partners.reader is None:
            return "[tool output not in the buffer]"
        return "[no tool output recorded]"
    holder = partners.summarized_in(ev.span_id)
    if holder is not None:
        return f"[tool output {ev.span_id} is summarized in {holder}]"
    return f"[tool output pruned: {_tokens(ev.tokens)}; restore {ev.span_id}]"


def _orphan_result_text(result: Span, partners: _Partners) -> str:
    call_id = result.meta.get("tool_call_id")
    ev = partners.call_of(result)
    if ev is None:
        head = f"[output of tool call {call_id}; the call is not in the buffer]"
    else:
        holder = partners.summarized_in(ev.span_id)
        where = f"summarized in {holder}" if holder else f"pruned; restore {ev.span_id}"
        head = f"[output of tool call {call_id} ({ev.meta.get('name', '?')}); the call was {where}]"
    return f"{head}\n{result.text}"


def _items(spans: Sequence[Span], mark_derived: bool, partners: _Partners, ids: bool = False) -> Iterator[_Item]:
    spans = list(spans)

    def tagged(span: Span, text: str) -> str:
        return f"{span_tag(span)} {text}" if ids else text

    # Pair each live result with the nearest earlier live, still unanswered call of the same id.
    answer_of: dict[int, int] = {}  # index of call span -> index of its result span
    answered: set[int] = set()
    open_calls: dict[str, list[int]] = {}
    for i, s in enumerate(spans):
        if s.observed and s.kind == "tool_call":
            open_calls.setdefault(s.meta["tool_call_id"], []).append(i)
        elif s.observed and s.kind == "tool_result":
            waiting = open_calls.get(s.meta["tool_call_id"])
            if waiting:
                answer_of[waiting.pop()] = i
                answered.add(i)

    i = 0
    while i < len(spans):
        s = spans[i]
        if s.observed and s.kind == "tool_call":
            # A run of consecutive calls is one assistant turn (parallel calls); their answers follow
            # it immediately, moved up if something else sits between a call and its result.
            group: list[int] = []
            while i < len(spans) and spans[i].observed and spans[i].kind == "tool_call":
                group.append(i)
                i += 1
            calls, answers = [], []
            for k in group:
                call = spans[k]
                calls.append(
                    {
                        "id": call.meta["tool_call_id"],
                        "name": call.meta["name"],
                        "arguments": call.meta.get("arguments"),
                        "text": tagged(call, call.text),
                        "span": call.id,
                    }
                )
                if k in answer_of:
                    res = spans[answer_of[k]]
                    answers.append({"id": call.meta["tool_call_id"], "text": tagged(res, res.text), "span": res.id})
                else:
                    answers.append(
                        {"id": call.meta["tool_call_id"], "text": _missing_result_text(call, partners), "span": ""}
                    )
            yield _Item("assistant", calls=calls, answers=answers)
            continue
        i += 1
        if s.observed and s.kind == "tool_result":
            if i - 1 in answered:
                continue  # already rendered right after its call
            yield _Item("user", tagged(s, _orphan_result_text(s, partners)))
            continue
        text = s.text
        if ids:
            sep = "\n" if s.derived and mark_derived else " "
            text = f"{span_tag(s, mark_derived=mark_derived)}{sep}{text}"
        elif s.derived and mark_derived:
            text = f"{derived_marker(s)}\n{text}"
        yield _Item(s.role, text, thinking=s.kind == "thinking")


# -- text -----------------------------------------------------------------------------------------


def _args_json(arguments: Any) -> str:
    """OpenAI wants ``arguments`` as a JSON string: keep a JSON string as is, encode anything else."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
            return arguments
        except ValueError:
            return json.dumps(arguments)
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)


def _args_object(arguments: Any) -> dict[str, Any]:
    """Anthropic wants ``input`` as an object."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"arguments": arguments}
    if isinstance(arguments, dict):
        return json.loads(json.dumps(arguments, default=str))
    return {"arguments": json.loads(json.dumps(arguments, default=str))}


def _to_text(items: list[_Item]) -> str:
    blocks: list[str] = []
    for it in items:
        if not it.calls:
            blocks.append(f"[{it.role}{' thinking' if it.thinking else ''}]\n{it.text}")
            continue
        for c in it.calls:
            blocks.append(f"[assistant → tool call {c['name']} {c['id']} {_args_json(c['arguments'])}]\n{c['text']}")
        for a in it.answers:
            blocks.append(f"[tool result {a['id']}]\n{a['text']}")
    return "\n\n".join(blocks)


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def _to_openai(items: list[_Item]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it in items:
        if not it.calls:
            out.append({"role": it.role, "content": it.text})
            continue
        out.append(
            {
                "role": "assistant",
                "content": "\n\n".join(c["text"] for c in it.calls),
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": _args_json(c["arguments"])},
                    }
                    for c in it.calls
                ],
            }
        )
        out.extend({"role": "tool", "tool_call_id": a["id"], "content": a["text"]} for a in it.answers)
    return out


# -- Anthropic Messages ----------------------------------------------------------------------------

_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _anthropic_id(call_id: str) -> str:
    """Anthropic accepts tool ids matching ``[a-zA-Z0-9_-]+``; map any other id to a stable one."""
    if _TOOL_ID.match(call_id):
        return call_id
    return "toolu_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def _to_anthropic(items: list[_Item]) -> dict[str, Any]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # roles must alternate: merge the turn
        else:
            messages.append({"role": role, "content": blocks})

    for it in items:
        if it.role == "system" and not it.calls:
            if not messages:
                system.append(it.text)  # the leading system prompt is a top-level parameter
            else:
                add("user", [{"type": "text", "text": f"[system]\n{it.text}"}])
            continue
        if not it.calls:
            add(it.role, [{"type": "text", "text": it.text}])
            continue
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "\n\n".join(c["text"] for c in it.calls)}]
        blocks.extend(
            {"type": "tool_use", "id": _anthropic_id(c["id"]), "name": c["name"], "input": _args_object(c["arguments"])}
            for c in it.calls
        )
        add("assistant", blocks)
        # The results open the next user message; later user text merges in after them.
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": _anthropic_id(a["id"]), "content": a["text"]}
                    for a in it.answers
                ],
            }
        )
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "[earlier turns were pruned]"}]})
    return {"system": "\n\n".join(system), "messages": messages}
