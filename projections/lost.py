"""What a compaction dropped: ``lost(summary, sources)`` sorts the specifics of a derived span's
original observations into categories and says, per category, how many the summary kept.

A pure function over spans (the derived span and the observed originals it replaced, as
``Session.originals`` reads them back from the log); it never reads or writes the store.

Categories, each item counted once per distinct text:

- ``user_messages``: what the user typed (``role="user"`` messages that are not harness text);
  kept when the summary carries most of its wording (half of its 4-word runs, or every word of
  a message shorter than four words);
- ``instructions``: the user messages that ask for or forbid something (imperatives, "must",
  "never", "don't", ...), judged the same way;
- ``paths``, ``numbers`` (numbers, quantities, times, dates, versions) and ``ids`` (UUIDs,
  hashes, error codes, identifiers, URLs, hosts, emails): the specifics
  ``projections.grounding.specifics.extract`` finds in any source; kept when the summary states the same
  specific (same normalized value) or its text;
- ``commands``: shell commands the agent ran (the ``command``/``cmd`` argument of a tool call);
  kept when the summary holds the command's text;
- ``errors``: the first line of each tool result marked ``is_error``; kept when the summary holds it.

Harness text (``meta["harness"]``) is what the agent's host injected, not the session's own
material: it is not counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from engine.errors import InvalidInputError, SpanStateError
from engine.events import Rederived, Rewritten
from engine.spans import Span
from projections.buffer import span_from_event

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["LostItem", "LostCategory", "LostReport", "lost", "summary_of", "CATEGORIES", "is_instruction", "user_words"]

CATEGORIES = ("user_messages", "instructions", "paths", "commands", "errors", "numbers", "ids")

_NUMBER_KINDS = frozenset({"number", "quantity", "time", "date", "version"})
_ID_KINDS = frozenset({"uuid", "hash", "code", "identifier", "url", "host", "email"})
_SHELL_KEYS = ("command", "cmd")
_MAX_ITEM = 300  # characters of an item kept in the report (the span id leads to the whole text)

# A user message that asks for or forbids something. Deliberately plain: the first word an imperative
# verb, or a modal of obligation anywhere. Misses are still listed as user messages.
_IMPERATIVE = re.compile(
    r"^\s*(?:(?:please|also|and|then|now|first|next|so|ok|okay)[,]?\s+)*(?:add|always|avoid|build|change|check|commit|continue|create|delete|deploy|do|"
    r"don'?t|ensure|find|fix|focus|implement|keep|look|make|move|never|only|push|read|refactor|remove|"
    r"rename|replace|revert|run|see|start|stop|test|try|update|use|work|write)\b",
    re.I,
)
_OBLIGATION = re.compile(
    r"\b(?:must(?:n'?t)?|never|always|do not|don'?t|should(?:n'?t)?|make sure|instead of|only use|"
    r"no more than|at most|at least|not allowed|required?|avoid)\b",
    re.I,
)


class LostItem(msgspec.Struct, frozen=True, kw_only=True):
    """One dropped item: its text (cut at 300 characters) and the observed span that held it."""

    text: str
    span_id: str


class LostCategory(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kept: int
    total: int
    dropped: tuple[LostItem, ...] = ()

    @property
    def share_kept(self) -> float:
        return self.kept / self.total if self.total else 1.0


class LostReport(msgspec.Struct, frozen=True, kw_only=True):
    """What the compaction that wrote ``span_id`` dropped, category by category (``CATEGORIES``)."""

    span_id: str
    sources: int
    categories: tuple[LostCategory, ...]

    def category(self, name: str) -> LostCategory:
        for c in self.categories:
            if c.name == name:
                return c
        raise KeyError(name)


def user_words(span: Span) -> bool:
    """Whether ``span`` is what the user typed (not the harness speaking as the user)."""
    return span.role == "user" and span.kind == "message" and not span.meta.get("harness")


def is_instruction(text: str) -> bool:
    """Whether a user message asks for or forbids something."""
    return bool(_IMPERATIVE.search(text) or _OBLIGATION.search(text))


def summary_of(reader: LogReader, span_id: str | None = None) -> Span:
    """The summary (derived span) ``span_id`` of a session, live or not; by default the newest
    compaction's (the newest live derived span, else the newest written). ``InvalidInputError`` when
    the session has none, ``SpanStateError`` for an observed span's id."""
    if span_id is not None:
        reader.check_span_id(span_id)
        if not span_id.startswith("d"):
            raise SpanStateError(f"{span_id} is an observed span; name a summary (a derived span: d1, d2, ...)",
                                 span_id=span_id)
    live = reader.state.live
    if span_id is not None and span_id in live:
        return live[span_id]
    if span_id is None:
        derived = [s for s in live.values() if s.derived]
        if derived:
            return max(derived, key=lambda s: s.position)
    found = None
    for ev in reader.events():
        if isinstance(ev, (Rewritten, Rederived)) and (span_id is None or ev.span_id == span_id):
            found = ev
    if found is None:
        raise InvalidInputError(f"session {reader.name!r} has no compaction (no derived span) to inspect")
    return span_from_event(found)


def lost(summary: Span, sources: Sequence[Span]) -> LostReport:
    """What ``summary`` (a derived span) dropped of ``sources`` (its observed originals)."""
    # the extractor loads with the first report (``summary_of`` and the predicates need none of it)
    from projections.grounding.specifics import extract, grams, tokens

    text = summary.text
    flat = _flat(text)
    found = extract(text)
    said = {sp.key for sp in found} | {_flat(sp.text) for sp in found}
    summary_grams = grams(tokens(text))
    summary_words = set(tokens(text))

    # per category: the item's loose form -> (span id, its text, kept)
    buckets: dict[str, dict[str, tuple[str, str, bool]]] = {name: {} for name in CATEGORIES}

    # Each item is judged once, when first seen (the first span that holds it is the one named):
    # whether it was kept is a search of the whole summary, so it is not repeated for every
    # mention; and a text already read adds nothing a second time.
    def add(category: str, item: str, span_id: str, kept: Callable[[str], bool]) -> None:
        key = _flat(item)
        bucket = buckets[category]
        if key and key not in bucket:
            bucket[key] = (span_id, item, kept(key))

    def in_summary(key: str) -> bool:
        return key in flat

    read: set[str] = set()
    for span in sources:
        if span.meta.get("harness"):
            continue
        if user_words(span):
            carried = _carried(span.text, summary_grams, summary_words)
            add("user_messages", span.text, span.id, lambda _, c=carried: c)
            if is_instruction(span.text):
                add("instructions", span.text, span.id, lambda _, c=carried: c)
        if span.kind == "tool_call":
            command = _command(span.meta.get("arguments"))
            if command:
                add("commands", command, span.id, in_summary)
        if span.kind == "tool_result" and span.meta.get("is_error"):
            first = next((ln.strip() for ln in span.text.splitlines() if ln.strip()), "")
            if first:
                add("errors", first, span.id, lambda _, f=first: _flat(f[:120]) in flat)
        if span.text in read:
            continue
        read.add(span.text)
        for sp in extract(span.text):
            category = "paths" if sp.category == "path" else (
                "numbers" if sp.category in _NUMBER_KINDS else "ids" if sp.category in _ID_KINDS else "")
            if category and not sp.weak:
                add(category, sp.text, span.id, lambda key, k=sp.key: k in said or key in flat)

    categories = []
    for name in CATEGORIES:
        items = buckets[name].values()
        kept = sum(1 for _, _, k in items if k)
        dropped = tuple(LostItem(text=t[:_MAX_ITEM], span_id=sid) for sid, t, k in items if not k)
        categories.append(LostCategory(name=name, kept=kept, total=len(buckets[name]), dropped=dropped))
    return LostReport(span_id=summary.id, sources=len(sources), categories=tuple(categories))


def _flat(text: str) -> str:
    """Text compared loosely: case, backticks and runs of whitespace do not matter."""
    return " ".join(text.replace("`", " ").lower().split())


def _carried(message: str, summary_grams: set[str], summary_words: set[str]) -> bool:
    from projections.grounding.specifics import grams, tokens

    words = tokens(message)
    if not words:
        return True
    if len(words) < 4:
        return all(w in summary_words for w in words)
    mine = grams(words)
    return len(mine & summary_grams) * 2 >= len(mine)


def _command(arguments: Any) -> str:
    """The shell command of a tool call's arguments (a dict, or its JSON text), if it has one."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    if not isinstance(arguments, dict):
        return ""
    for key in _SHELL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            # ["bash", "-lc", "pytest -q"]: the script is the command
            if len(value) >= 3 and value[1] in ("-c", "-lc"):
                return value[-1].strip()
            return " ".join(value).strip()
    return ""
