"""When an event happened, in nanoseconds since the epoch, for span and event timestamps.

An event's ``at`` is when it was recorded. An importer that keeps the source's own time in ``meta``
(``original_at``, or a transcript line's ``timestamp``) is preferred: an imported Claude Code session
then shows when its calls and compactions really happened, not when it was imported."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["event_ns", "ORIGINAL_TIME_KEYS"]

ORIGINAL_TIME_KEYS = ("original_at", "timestamp")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ns(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _parse(value: Any) -> int | None:
    if isinstance(value, datetime):
        return _ns(value)
    if isinstance(value, str) and len(value) >= 10:
        try:
            return _ns(datetime.fromisoformat(value))
        except ValueError:
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value * 1e9) if value < 1e11 else int(value * 1e6)  # seconds, else milliseconds
    return None


def event_ns(event: Any) -> int:
    """The event's original time if its meta carries one, else its recorded time."""
    meta = getattr(event, "meta", None)
    if meta:
        for key in ORIGINAL_TIME_KEYS:
            if key in meta:
                found = _parse(meta[key])
                if found is not None:
                    return found
    return _ns(event.at)
