"""Reading a transcript file and remembering where an import stopped: JSONL lines from a byte
offset, the fingerprint of what was read, and the checkpoint kept in the reason of the session's
``imported`` mark."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from engine.validate import nesting

if TYPE_CHECKING:
    from engine.importers.items import ParseContext
    from engine.session import Session

__all__ = [
    "CHECKPOINT_LABEL",
    "Checkpoint",
    "session_info",
    "jsonl_lines",
    "jsonl_records",
    "fingerprint",
    "file_size",
    "pinned",
    "replaced",
    "decode_line",
    "TooDeep",
    "MAX_RECORD_DEPTH",
]

CHECKPOINT_LABEL = "imported"  # the mark whose reason holds the checkpoint (moved at every commit)


# -- reading JSONL -------------------------------------------------------------------------------

# A line nested deeper is malformed: no transcript needs it, and refusing it before a parser walks it
# keeps every parser (and the JSON encoders it calls) far from Python's recursion limit.
MAX_RECORD_DEPTH = 128

_pinned: ContextVar[dict[str, BinaryIO]] = ContextVar("ctxledger_pinned_transcripts", default={})


@contextlib.contextmanager
def pinned(path: Path) -> Iterator[BinaryIO | None]:
    """Open ``path`` once for the duration of an import: every read of it through this module
    (``jsonl_lines``, ``fingerprint``, ``file_size``) reads that open file, so the validating pass,
    the writing pass and the checkpoint's fingerprint see the same bytes even when the file is
    atomically replaced meanwhile (the old file stays readable through its descriptor)."""
    try:
        f = open(path, "rb") if os.path.isfile(path) else None
    except OSError:
        f = None
    if f is None:
        yield None
        return
    token = _pinned.set({**_pinned.get(), os.fspath(path): f})
    try:
        yield f
    finally:
        _pinned.reset(token)
        f.close()


def replaced(path: Path, f: BinaryIO) -> bool:
    """Whether ``path`` no longer names the open file ``f`` (it was replaced or removed)."""
    try:
        now, then = os.stat(path), os.fstat(f.fileno())
    except OSError:
        return True
    return (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino)


@contextlib.contextmanager
def _open(path: Path) -> Iterator[BinaryIO]:
    f = _pinned.get().get(os.fspath(path))
    if f is not None:
        yield f
        return
    with open(path, "rb") as f:
        yield f


def jsonl_lines(
    path: Path, *, offset: int = 0, line: int = 0, require_newline: bool = False, until: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, end offset, raw line)`` from byte ``offset`` (where line ``line`` ended), up to
    byte ``until`` (where an earlier pass stopped; None: to the end).

    An unterminated last line is yielded only when ``require_newline`` is false (the caller decides
    whether it parses; a live writer may be mid-line)."""
    with _open(path) as f:
        f.seek(offset)
        for raw in f:
            if until is not None and offset + len(raw) > until:
                return
            line += 1
            offset += len(raw)
            if not raw.endswith(b"\n") and require_newline:
                return
            yield line, offset, raw


def fingerprint(path: Path, offset: int) -> str:
    """A constant-cost fingerprint of the first ``offset`` bytes of a file: its length and its first
    and last 64 KiB. Enough to tell an appended-to transcript from a different one."""
    h = hashlib.sha256(str(offset).encode())
    with _open(path) as f:
        fd = f.fileno()  # read with pread: a pinned file's position belongs to the pass reading it
        h.update(os.pread(fd, min(offset, 65536), 0))
        if offset > 65536:
            tail = max(65536, offset - 65536)
            h.update(os.pread(fd, offset - tail, tail))
    return h.hexdigest()[:32]


class TooDeep(msgspec.DecodeError):
    """A line nested deeper than ``MAX_RECORD_DEPTH`` (or than Python's recursion limit allows): a
    decode error like any other, so a parser that catches ``msgspec.DecodeError`` treats it as a
    malformed line (an error naming it, or skipped under ``--skip-bad``)."""


def decode_line(decode: Callable[[bytes], Any], raw: bytes) -> Any:
    """``decode(raw)``, refusing a line nested deeper than ``MAX_RECORD_DEPTH`` with ``TooDeep``.
    Every parser that decodes JSON itself should decode through this."""
    try:
        record = decode(raw)
    except RecursionError:
        raise TooDeep(f"nested too deep to decode (the limit is {MAX_RECORD_DEPTH} levels)") from None
    # no more brackets than the limit: it cannot nest deeper (brackets in strings only over-count)
    if raw.count(b"[") + raw.count(b"{") > MAX_RECORD_DEPTH and nesting(record, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
        raise TooDeep(f"nested more than {MAX_RECORD_DEPTH} levels deep (the limit)")
    return record


# -- checkpoints -----------------------------------------------------------------------------------


class Checkpoint(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where an import stopped: stored as JSON in the reason of the ``imported`` mark."""

    format: str
    source: str
    line: int = 0
    offset: int = 0
    fingerprint: str = ""
    unknown: dict[str, int] = {}  # unknown line types seen so far (the "meta note")
    bad_lines: list[int] = []

    @classmethod
    def of(cls, session: Session) -> Checkpoint | None:
        position = session.marks().get(CHECKPOINT_LABEL)
        if position is None:
            return None
        try:
            return msgspec.json.decode(session.event(position).reason, type=cls)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None


def session_info(session: Session) -> dict[str, Any]:
    """The JSON an importer stored in the reason of the session's first event (format, source,
    the transcript's own session id, the parent session of a sidechain)."""
    try:
        info = json.loads(session.event(1).reason or "{}")
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def file_size(path: Path) -> int:
    f = _pinned.get().get(os.fspath(path))
    try:
        return os.fstat(f.fileno()).st_size if f is not None else os.path.getsize(path)
    except OSError:
        return 0


def jsonl_records(
    path: Path, start: Checkpoint | None, ctx: ParseContext, decode: Callable[[bytes], Any], *, follow: bool
) -> Iterator[tuple[int, int, Any]]:
    """Decoded JSONL records after the checkpoint: ``(line, end offset, record)``, where a record
    that does not decode (or nests deeper than ``MAX_RECORD_DEPTH``) is the exception itself (the
    parser decides: error or ``--skip-bad``). Reads up to ``ctx.until`` (where the validating pass
    stopped) and leaves ``ctx.reached`` at the end of the last line read.

    An unterminated last line that does not decode is a writer caught mid-line: it is left for the
    next run (``pending_tail``), never an error. Following a live file (``follow``), only complete
    lines are read."""
    offset, line = (start.offset, start.line) if start else (0, 0)
    for number, end, raw in jsonl_lines(path, offset=offset, line=line, require_newline=follow, until=ctx.until):
        ctx.report.lines += 1
        ctx.report.bytes += len(raw)
        if not raw.strip():
            ctx.taken(number, end)
            ctx.reached = end
            continue
        try:
            record = decode_line(decode, raw)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
            if not raw.endswith(b"\n"):
                ctx.report.pending_tail = True
                ctx.report.lines -= 1
                ctx.report.bytes -= len(raw)
                return
            record = e
        ctx.reached = end
        yield number, end, record
