"""What every transcript importer shares: the ``Importer`` base a format subclasses, and (re-exported
here for the parsers) the items a parser yields, the report, reading JSONL and the writer.

An importer reads its source twice. The first pass parses every new line without writing anything,
so a malformed line stops the import before the store is touched (``ImportFormatError`` naming the
file and line). The second pass parses again and writes, a chunk of items per transaction, so memory
stays flat in the transcript's size. Every write transaction ends with the checkpoint mark (``imported``)
whose reason records the source, the last line and byte offset taken and a fingerprint of the bytes
before it: a re-import or a restarted watch resumes after that line (nothing doubled, nothing
skipped), and a different transcript under the same name is refused.

Modules: ``items`` (what a parser yields and parses with), ``source`` (JSONL, fingerprints,
checkpoints), ``writer`` (items into a session), ``runner`` (the two passes), this base on top.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.importers.items import (
    CHUNK,
    MAX_META_ARGS,
    MAX_TEXT_CHARS,
    Apply,
    Bad,
    Compact,
    Forget,
    ImportReport,
    ImportResult,
    Observe,
    ParseContext,
    check_name,
    clip,
    decode_error,
    meta_arguments,
)
from engine.importers.runner import run_import
from engine.importers.source import (
    CHECKPOINT_LABEL,
    Checkpoint,
    file_size,
    fingerprint,
    jsonl_lines,
    jsonl_records,
    session_info,
)
from engine.importers.writer import SessionWriter

if TYPE_CHECKING:
    from engine.ledger import Ledger

__all__ = [
    "Observe",
    "Compact",
    "Forget",
    "Bad",
    "Apply",
    "ImportReport",
    "ImportResult",
    "ParseContext",
    "Checkpoint",
    "Importer",
    "SessionWriter",
    "jsonl_lines",
    "jsonl_records",
    "fingerprint",
    "file_size",
    "session_info",
    "CHECKPOINT_LABEL",
    "CHUNK",
    "MAX_TEXT_CHARS",
    "MAX_META_ARGS",
    "check_name",
    "clip",
    "decode_error",
    "meta_arguments",
]


class Importer:
    """One transcript format. Subclasses set ``format`` and implement ``detect``, ``transcripts``
    (the source files/dirs under a path), ``default_name`` and ``parse``."""

    format = ""

    def detect(self, path: Path) -> bool:
        raise NotImplementedError

    def run(self, ledger: Ledger, path: Any, *, name: str | None = None, skip_bad: bool = False,
            follow: bool = False):
        return run_import(self, ledger, Path(path), name=name, skip_bad=skip_bad, follow=follow)

    # hooks used by the runner
    def transcripts(self, path: Path) -> list[Path]:
        raise NotImplementedError

    def default_name(self, source: Path) -> str:
        raise NotImplementedError

    def session_info(self, source: Path) -> dict[str, Any]:
        return {}

    def children(self, source: Path, name: str) -> list[tuple[Path, str, dict[str, Any]]]:
        """Further transcripts imported with this one as their own sessions (subagents)."""
        return []

    def links(self, child: Path, child_name: str) -> dict[str, str]:
        """``{text snippet: session name}``: a child transcript that produced a summary containing
        the snippet (the compaction call behind a summary)."""
        return {}

    def read(self, source: Path, start: Checkpoint | None, ctx: ParseContext, *, follow: bool
             ) -> Iterator[tuple[int, int, Any]]:
        """``(line, end offset, decoded record or the decode error)`` after the checkpoint."""
        raise NotImplementedError

    def size(self, source: Path) -> int:
        return file_size(source)

    def fingerprint(self, source: Path, offset: int) -> str:
        return fingerprint(source, offset)

    def parse(self, records: Iterator[tuple[int, int, Any]], ctx: ParseContext) -> Iterator[Any]:
        raise NotImplementedError
