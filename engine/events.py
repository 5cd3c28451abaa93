"""The events of a session's log: past-tense, frozen, immutable.

Every event carries who did it (``by``), why (``reason``), when (``at``) and the hash of its
predecessor (``prev``). ``at`` is when the thing happened: for an imported transcript that is the
transcript's own time, and the time the event was appended to the log is then kept in ``recorded``
(empty when the two are the same moment). New fields must always get defaults so old logs keep
decoding.
A session's events are one stream; an event's ``position`` is its 1-based version in it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from uuid import UUID

import msgspec

__all__ = [
    "Event",
    "SessionStarted",
    "Observed",
    "Pruned",
    "Rewritten",
    "Rederived",
    "Restored",
    "Expanded",
    "RewriteRefused",
    "Marked",
    "EVENT_TYPES",
    "now",
]


_UTC = timezone.utc
_now = datetime.now


def now() -> datetime:
    return _now(_UTC)


class Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    # gc=False: events hold only scalars, tuples and JSON-like dicts, so they can never be part of
    # a reference cycle; untracked, a long session's objects add nothing to the collector's passes.
    # originator_id is stored in its own column, never in the payload (it is None while encoding).
    originator_id: UUID | None = None
    originator_version: int = 0
    at: datetime
    prev: bytes = b""
    by: str = ""
    reason: str = ""
    recorded: datetime | None = None  # when it was appended, if that differs from ``at`` (an import)

    @property
    def position(self) -> int:
        return self.originator_version

    @property
    def type(self) -> str:
        return type(self).__name__


class SessionStarted(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    name: str
    strict: bool = True
    forked_from: UUID | None = None
    fork_position: int = 0


class Observed(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    span_id: str
    text: str
    role: str = "user"
    kind: str = "message"
    tokens: int = 0
    meta: dict[str, Any] = {}


class Pruned(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    span_id: str
    content_position: int  # the event that holds the pruned span's text, read back by restore
    meta: dict[str, Any] = {}  # about the edit, e.g. the tool call that made it (engine.tools)


class Rewritten(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    span_id: str
    text: str
    inputs: tuple[str, ...]  # the immediate inputs (derived ones only in permissive sessions)
    input_positions: tuple[int, ...] = ()  # where each input's text was at the time
    sources: tuple[str, ...] = ()  # observed originals at the bottom of the chain
    source_positions: tuple[int, ...] = ()
    generation: int = 1
    violation: bool = False  # a derived input was rewritten (permissive sessions only)
    role: str = "user"
    kind: str = "summary"
    tokens: int = 0
    meta: dict[str, Any] = {}


class Rederived(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A derived span's text rebuilt from its ORIGINAL observed sources; the span keeps its id."""

    span_id: str
    text: str
    sources: tuple[str, ...] = ()
    source_positions: tuple[int, ...] = ()
    generation: int = 1
    role: str = "user"
    kind: str = "summary"
    tokens: int = 0
    meta: dict[str, Any] = {}


class Restored(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    span_id: str
    content_position: int
    meta: dict[str, Any] = {}


class Expanded(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A live derived span replaced by its original observed spans."""

    span_id: str
    restored: tuple[str, ...] = ()
    restored_positions: tuple[int, ...] = ()
    meta: dict[str, Any] = {}


class RewriteRefused(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """An attempted rewrite that would have broken the rules: kept for forensics."""

    command: str = "rewrite"  # or "rederive"
    inputs: tuple[str, ...] = ()
    text: str = ""
    offending: tuple[str, ...] = ()  # the inputs that caused the refusal
    findings: tuple[dict[str, Any], ...] = ()  # grounding gate findings, when it refused
    meta: dict[str, Any] = {}  # about the attempt, e.g. the tool call and the editor's own reason


class Marked(Event, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    label: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        SessionStarted,
        Observed,
        Pruned,
        Rewritten,
        Rederived,
        Restored,
        Expanded,
        RewriteRefused,
        Marked,
    )
}
