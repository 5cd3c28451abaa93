"""Replay with another policy: time travel as a what-if.

``replay(ledger, "agent-42", policy("guarded"), into="agent-42-guarded")`` feeds every observation
of a session, in order and with its original token count, into a new session and lets the given
compactor decide after each one. The source's own prunes and rewrites are not replayed — the new
policy makes its own — and marks are, so both sessions can be compared at "cycle-16".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import InvalidInputError
from engine.events import Marked, Observed

if TYPE_CHECKING:
    from engine.compaction import Compactor
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = ["replay"]

BATCH = 256  # observations written per transaction


def replay(
    ledger: Ledger,
    session: Session | str,
    compactor: Compactor,
    *,
    into: str,
    stop: int | str | None = None,
    by: str = "replay",
    progress=None,
) -> Session:
    """A new session ``into`` holding ``session``'s observations (up to position ``stop``) compacted
    by ``compactor`` after each one. ``progress(n)`` is called with the number of events read."""
    from engine.compaction import Compactor

    source = ledger.session(session) if isinstance(session, str) else session
    if not isinstance(compactor, Compactor):
        raise InvalidInputError(f"replay needs a Compactor, not {type(compactor).__name__}")
    last = source.resolve_position(stop)
    target = ledger.create_session(
        into,
        strict=True,
        by=by,
        reason=f"replay of {source.name!r} positions 1..{last} under policy {compactor.name!r}",
    )
    pending = 0
    read = 0
    batch = target.batch()
    batch.__enter__()
    try:
        for ev in source.events(1, last):
            read += 1
            if type(ev) is Observed:
                target.observe(ev.text, role=ev.role, kind=ev.kind, meta=ev.meta, by=ev.by, tokens=ev.tokens)
                compactor.step(target)
                pending += 1
            elif type(ev) is Marked:
                target.mark(ev.label, by=ev.by, reason=ev.reason)
                pending += 1
            if pending >= BATCH:
                batch.__exit__(None, None, None)
                if progress is not None:
                    progress(read)
                read = pending = 0
                batch = target.batch()
                batch.__enter__()
    finally:
        batch.__exit__(None, None, None)
    if progress is not None and read:
        progress(read)
    return target
