"""Transcript importers: other agents' session files (Claude Code, Codex, OpenHands, message logs)
read into ctxledger sessions, their compactions recorded as what they are (derived spans).

    from engine.importers import import_path
    result = import_path(ledger, "~/.claude/projects/my-project/", format="claude-code")
    result.session, result.sessions, result.report

Each format is one module with an ``IMPORTER`` object registered in the entry-point group
``ctxledger.importers``; ``Ledger.import_`` finds them there.
"""

from engine.importers.base import Checkpoint, ImportReport, ImportResult
from engine.importers.registry import detect_format, formats, import_path, importer

__all__ = ["import_path", "detect_format", "formats", "importer", "ImportReport", "ImportResult", "Checkpoint"]
