"""Following live transcripts: ``watch`` imports what is already there, then, each time a file under
the directory changes (``watchfiles``), imports the new complete lines of the transcripts it belongs
to (the checkpoint makes this idempotent: nothing doubled, nothing skipped; a half-written last line
waits for its newline) and audits a session the moment a compaction lands in it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import InvalidInputError, LedgerError

__all__ = ["watch", "WatchEvent"]


class WatchEvent:
    """What ``watch`` reports: ``kind`` is "import" (``report``), "drift" (``session``, ``finding``:
    a finding of the audit about a compaction that just landed) or "error" (``error``)."""

    __slots__ = ("kind", "report", "session", "finding", "error")

    def __init__(self, kind: str, *, report: Any = None, session: str = "", finding: Any = None, error: Any = None):
        self.kind, self.report, self.session, self.finding, self.error = kind, report, session, finding, error


def _owner(changed: Path, sources: list[Path]) -> Path | None:
    """The transcript a changed file belongs to: itself, its conversation directory, or (a subagent
    file under ``<stem>/subagents/``) the parent transcript."""
    for src in sources:
        if changed == src or src in changed.parents or src.with_suffix("") in changed.parents:
            return src
    return None


def watch(ledger: Any, path: Any, *, format: str, on_event: Callable[[WatchEvent], None],
          stop_event: threading.Event | None = None, skip_bad: bool = False,
          force_polling: bool | None = None) -> None:
    """Import and follow the transcripts under ``path`` until ``stop_event`` is set (or Ctrl-C)."""
    try:
        import watchfiles
    except ImportError:
        raise InvalidInputError("ctxledger watch needs watchfiles: pip install 'ctxledger[watch]'") from None
    from engine.importers.registry import importer as importer_for
    from engine.importers.runner import import_transcript

    root = Path(path)
    if not root.is_dir():
        raise InvalidInputError(f"{root}: watch follows a directory of transcripts")
    imp = importer_for(format)

    def sync(source: Path) -> None:
        name = imp.default_name(source)
        try:
            before = ledger.session(name).position if name in ledger else 0
            done = import_transcript(imp, ledger, source, name, imp.session_info(source), skip_bad=skip_bad,
                                     follow=True, with_children=True)
        except LedgerError as e:
            on_event(WatchEvent("error", error=e))
            return
        for session, report in done:
            if report.already_imported or (not report.spans and not report.compactions):
                continue
            on_event(WatchEvent("import", report=report, session=session.name))
            if report.compactions and session.name == name:
                for finding in _new_findings(session, before):
                    on_event(WatchEvent("drift", session=session.name, finding=finding))

    seen: dict[Path, tuple[int, int]] = {}

    def changed(source: Path) -> bool:
        """Whether a transcript (or, for a directory, its event files) changed since it was synced."""
        files = [source] if source.is_file() else list(source.rglob("*"))
        files += list(source.with_suffix("").rglob("*.jsonl")) if source.is_file() else []
        stamp = (len(files), sum(f.stat().st_size + f.stat().st_mtime_ns for f in files if f.is_file()))
        if seen.get(source) == stamp:
            return False
        seen[source] = stamp
        return True

    for source in imp.transcripts(root):
        changed(source)
        sync(source)
    # yield_on_timeout: every second without events the transcripts' sizes are checked too, so a
    # write that landed before the watcher started (or an event the OS dropped) is not missed.
    for changes in watchfiles.watch(root, stop_event=stop_event, raise_interrupt=False, yield_on_timeout=True,
                                    rust_timeout=1000, force_polling=force_polling, debounce=200, step=50):
        sources = imp.transcripts(root)
        touched = {_owner(Path(p), sources) for _, p in changes} if changes else set(sources)
        for source in sorted(s for s in touched if s is not None):
            if changed(source):
                sync(source)


def _new_findings(session: Any, before: int) -> list[Any]:
    """Grounding and structure findings of the audit about events after ``before``."""
    report = session.audit()
    return [f for f in report.findings
            if f.severity in ("error", "warning") and any(p > before for p in f.positions)]
