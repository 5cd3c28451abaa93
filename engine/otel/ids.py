"""Trace and span ids derived from the session and a log position, never drawn at random: exporting
a session twice (or live, then again with ``ctxledger otel export``) gives every span the same ids,
so a backend that de-duplicates by id keeps one copy."""

from __future__ import annotations

from hashlib import blake2b
from uuid import UUID

__all__ = ["trace_id", "span_id"]


def _digest(session: UUID, tag: bytes, key: int, size: int) -> int:
    value = int.from_bytes(blake2b(session.bytes + tag + key.to_bytes(8, "big"), digest_size=size).digest(), "big")
    return value or 1  # an all-zero id is invalid in OTLP; a 2**-64 chance, but never emit one


def trace_id(session: UUID, turn_start: int) -> int:
    """The trace of the turn that starts at ``turn_start``."""
    return _digest(session, b"trace", turn_start, 16)


def span_id(session: UUID, tag: str, position: int) -> int:
    """A span of the session: ``tag`` says which kind (``turn``, ``compaction``, ``eval``...),
    ``position`` which event (or turn) it stands for."""
    return _digest(session, tag.encode(), position, 8)
