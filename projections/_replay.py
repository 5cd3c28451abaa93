"""Folding a session's events the way ``Ledger._rebuild`` does, for the read-side projections.

A fork's log is its parent's events up to the fork position followed by its own, which start with a
second ``SessionStarted``: that one renames the buffer instead of emptying it."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from engine.events import Event, SessionStarted
from projections.buffer import BufferState, apply

__all__ = ["step"]


def step(state: BufferState | None, ev: Event, load: Callable[[int], Event]) -> BufferState:
    """``apply`` one event, treating a fork's own ``SessionStarted`` as a rename."""
    if type(ev) is SessionStarted and ev.forked_from is not None and state is not None:
        return msgspec.structs.replace(
            state, session_id=ev.originator_id, name=ev.name, strict=ev.strict, started_at=ev.at,
            forked_from=ev.forked_from, fork_position=ev.fork_position, version=ev.originator_version,
        )
    return apply(state, ev, load)
