"""Running an importer: which transcripts, which sessions, the validating pass, the writing pass, the
checkpoint. Shared by every format, the CLI's ``import`` and ``watch``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine.errors import DuplicateSessionError, InvalidInputError
from engine.importers.base import (
    CHECKPOINT_PREFIX,
    Apply,
    Bad,
    Checkpoint,
    Compact,
    Forget,
    ImportReport,
    ImportResult,
    Observe,
    ParseContext,
    SessionWriter,
    session_info,
)

if TYPE_CHECKING:
    from engine.importers.base import Importer
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = ["run_import", "import_transcript"]


def run_import(importer: Importer, ledger: Ledger, path: Path, *, name: str | None = None,
               skip_bad: bool = False, follow: bool = False) -> ImportResult:
    """Import every transcript ``importer`` finds at ``path`` (a file or a directory)."""
    if not path.exists():
        raise InvalidInputError(f"{path}: no such file or directory")
    sources = importer.transcripts(path)
    if not sources:
        raise InvalidInputError(f"{path}: no {importer.format} transcript found there")
    if name is not None and len(sources) > 1:
        raise InvalidInputError(
            f"--session names one transcript, but {path} holds {len(sources)} {importer.format} transcripts"
        )
    sessions: list[Session] = []
    reports: list[ImportReport] = []
    for source in sources:
        primary = name or importer.default_name(source)
        done = import_transcript(importer, ledger, source, primary, importer.session_info(source),
                                 skip_bad=skip_bad, follow=follow, with_children=True)
        for s, r in done:
            sessions.append(s)
            reports.append(r)
    # the primary sessions first (a transcript's children are imported before it, to be linked)
    order = {importer.default_name(src) if name is None else name: i for i, src in enumerate(sources)}
    pairs = sorted(zip(sessions, reports), key=lambda p: (order.get(p[0].name, len(order)),))
    return ImportResult([p[0] for p in pairs], [p[1] for p in pairs])


def import_transcript(importer: Importer, ledger: Ledger, source: Path, name: str, info: dict[str, Any], *,
                      skip_bad: bool = False, follow: bool = False,
                      with_children: bool = False) -> list[tuple[Session, ImportReport]]:
    """One transcript (and, ``with_children``, its subagent transcripts first) into its sessions."""
    out: list[tuple[Session, ImportReport]] = []
    links: dict[str, str] = {}
    if with_children:
        for child, child_name, child_info in importer.children(source, name):
            out.extend(import_transcript(importer, ledger, child, child_name, child_info,
                                         skip_bad=skip_bad, follow=follow))
            links.update(importer.links(child, child_name))
    out.insert(0, _import_one(importer, ledger, source, name, info, links, skip_bad=skip_bad, follow=follow))
    return out


def _import_one(importer: Importer, ledger: Ledger, source: Path, name: str, info: dict[str, Any],
                links: dict[str, str], *, skip_bad: bool, follow: bool) -> tuple[Session, ImportReport]:
    t0 = time.perf_counter()
    session = ledger.session(name) if name in ledger else None
    start = _resume_point(importer, session, source, name)

    # Pass 1: parse every new line, write nothing (a malformed line raises here).
    dry = ImportReport(format=importer.format, source=str(source), session=name)
    ctx = ParseContext(source, dry, skip_bad=skip_bad, info=info)
    ctx.links = links
    writers: dict[str, SessionWriter] = {}
    for item in importer.parse(importer.read(source, start, ctx, follow=follow), ctx):
        _apply(item, lambda stream: writers.setdefault(stream, SessionWriter(None, dry)))

    report = ImportReport(format=importer.format, source=str(source), session=name)
    first = (start.line if start else 0)
    if ctx.safe_line <= first and session is not None:
        report.already_imported = not dry.pending_tail and not dry.lines
        report.pending_tail = dry.pending_tail
        report.last_line = first
        report.lines = dry.lines
        report.skipped = dry.skipped
        report.sessions = [name]
        report.seconds = time.perf_counter() - t0
        return session, report

    # Pass 2: the same parse, written a chunk at a time.
    if session is None:
        session = ledger.create_session(name, strict=False, by=f"ctxledger-import:{importer.format}",
                                        reason=json.dumps({"format": importer.format, "source": str(source), **info}))
    ctx = ParseContext(source, report, skip_bad=skip_bad, info=info)
    ctx.links = links
    streams: dict[str, SessionWriter] = {"": SessionWriter(session, report, counter=ledger.counter)}

    def writer(stream: str) -> SessionWriter:
        w = streams.get(stream)
        if w is None:
            sub = f"{name}/{stream}"
            s = ledger.session(sub) if sub in ledger else ledger.create_session(
                sub, strict=False, by=f"ctxledger-import:{importer.format}",
                reason=json.dumps({"format": importer.format, "source": str(source), "parent": name,
                                   "kind": stream}))
            w = streams[stream] = SessionWriter(s, report, counter=ledger.counter)
        return w

    for item in importer.parse(importer.read(source, start, ctx, follow=follow), ctx):
        _apply(item, writer)
    for w in streams.values():
        w.flush()
    report.first_line = first + 1
    report.last_line = ctx.safe_line
    report.sessions = [w.session.name for w in streams.values()]
    unknown = dict(start.unknown) if start else {}
    for k, v in report.unknown.items():
        unknown[k] = unknown.get(k, 0) + v
    if report.unknown:
        report.notes.append(
            "unknown line types were counted and skipped: " + ", ".join(f"{k} x{v}" for k, v in report.unknown.items())
        )
    checkpoint = Checkpoint(
        format=importer.format, source=str(source.resolve()), line=ctx.safe_line, offset=ctx.safe_offset,
        fingerprint=importer.fingerprint(source, ctx.safe_offset), unknown=unknown,
        bad_lines=(list(start.bad_lines) if start else []) + report.bad_lines,
    )
    note = msgspec.json.encode(checkpoint).decode()
    for w in streams.values():
        w.session.mark(f"{CHECKPOINT_PREFIX}{ctx.safe_line}", by=f"ctxledger-import:{importer.format}", reason=note)
    report.seconds = time.perf_counter() - t0
    return session, report


def _apply(item: Any, writer) -> None:
    t = type(item)
    if t is Observe:
        writer(item.stream).observe(item)
    elif t is Compact:
        writer(item.stream).compact(item)
    elif t is Forget:
        writer(item.stream).forget(item)
    elif t is Apply:
        writer(item.stream).apply(item)
    elif t is not Bad:
        raise TypeError(f"an importer yielded {t.__name__}")


def _resume_point(importer: Importer, session: Session | None, source: Path, name: str) -> Checkpoint | None:
    """The checkpoint to continue from, or the error for a name that holds something else."""
    if session is None:
        return None
    cp = Checkpoint.of(session)
    info = session_info(session)
    if cp is None or cp.format != importer.format:
        what = f"a {cp.format} transcript" if cp else "no imported transcript"
        raise DuplicateSessionError(
            f"a session named {name!r} already exists and holds {what}; "
            f"import {source} under another name (--session NAME)"
        )
    size = importer.size(source)
    if size < cp.offset or importer.fingerprint(source, cp.offset) != cp.fingerprint:
        raise DuplicateSessionError(
            f"session {name!r} holds a different transcript ({info.get('source') or cp.source}, imported up to "
            f"line {cp.line}); {source} does not start with the same content. Import it under another name "
            "(--session NAME)"
        )
    return cp

