"""Recording an agent's transcript from a hook: the existing resumable import, one writer at a time.

The importer resumes after its checkpoint, so a hook that runs twice for one compaction records it
once; it commits a chunk of lines and the checkpoint in one transaction, so a hook killed mid-way
leaves whole lines only. Two hooks of one session (PostCompact and SessionStart fire close together;
Codex launches matching hooks concurrently) take a lock first; where the lock is not available the
store's optimistic concurrency refuses the second writer and the import is retried from the new
checkpoint.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from engine.errors import ConcurrencyError, DuplicateSessionError, InvalidInputError
from engine.hooks.payload import HookInput
from engine.hooks.state import locked

__all__ = ["session_name", "record"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
RETRIES = 5


def session_name(agent: str, payload: HookInput) -> str | None:
    """The ledger session of the agent's session: ``claude-code:<session_id>`` / ``codex:<session_id>``,
    the names ``ctxledger import`` gives the same transcripts (None: let the importer name it)."""
    sid = payload.session_id
    return f"{agent}:{sid}" if sid and _SAFE_ID.match(sid) else None


def record(ledger: Any, agent: str, payload: HookInput) -> Any:
    """Import the payload's transcript into ``ledger`` up to its last whole line, with ctxledger's
    own importer of the agent's format; the ``ImportResult`` (its ``session`` is the agent
    session's ledger session)."""
    from engine.importers.registry import builtin

    path = Path(payload.transcript_path).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"the transcript {path} does not exist (nothing to record)")
    name = session_name(agent, payload)
    key = f"{ledger.url}|{agent}|{name or path.resolve()}"
    with locked(key):
        for attempt in range(RETRIES):
            try:
                return builtin(agent).run(ledger, path, name=name, skip_bad=True)
            except (ConcurrencyError, DuplicateSessionError) as e:
                # another writer got there first (no lock on this platform): resume after its checkpoint
                if attempt == RETRIES - 1 or (isinstance(e, DuplicateSessionError) and "holds" in e.message):
                    raise
                time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover
