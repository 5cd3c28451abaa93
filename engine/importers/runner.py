"""Running an importer: which transcripts, which sessions, the validating pass, the writing pass, the
checkpoint. Shared by every format, the CLI's ``import`` and ``watch``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine import validate
from engine.errors import DuplicateSessionError, InvalidInputError
from engine.importers.base import (
    CHUNK,
    Bad,
    Checkpoint,
    ImportReport,
    ImportResult,
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
    reports: list[ImportReport] = []
    for source in sources:
        primary = name or importer.default_name(source)
        done = import_transcript(importer, ledger, source, primary, importer.session_info(source),
                                 skip_bad=skip_bad, follow=follow, with_children=True)
        reports.extend(r for _, r in done)
    names: list[str] = []
    for r in reports:  # each transcript's session, then its sidechain sessions
        names.extend(n for n in (r.sessions or [r.session]) if n not in names)
    return ImportResult([ledger.session(n) for n in names], reports)


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
    began = None  # the transcript's own time of its first item: when the session really started
    for _item in importer.parse(importer.read(source, start, ctx, follow=follow), ctx):
        if began is None:
            began = _item_time(_item)

    report = ImportReport(format=importer.format, source=str(source), session=name, sessions=[name])
    first = start.line if start else 0
    if ctx.safe_line <= first and session is not None:
        report.already_imported = not dry.pending_tail and not dry.lines
        report.pending_tail = dry.pending_tail
        report.first_line = report.last_line = first
        report.lines = dry.lines
        report.skipped = dry.skipped
        report.seconds = time.perf_counter() - t0
        return session, report

    # Pass 2: the same parse, written a chunk at a time; each chunk's transaction ends with the
    # checkpoint, so an interrupted import resumes exactly where its last chunk ended.
    by = f"ctxledger-import:{importer.format}"
    if session is None:
        session = ledger.create_session(name, strict=False, by=by, happened_at=began,
                                        reason=json.dumps({"format": importer.format, "source": str(source), **info}))
    ctx = ParseContext(source, report, skip_bad=skip_bad, info=info)
    ctx.links = links
    streams: dict[str, SessionWriter] = {"": SessionWriter(session, report, counter=ledger.counter)}
    known_unknown = dict(start.unknown) if start else {}
    known_bad = list(start.bad_lines) if start else []

    def writer(stream: str) -> SessionWriter:
        w = streams.get(stream)
        if w is None:
            sub = f"{name}/{stream}"
            s = ledger.session(sub) if sub in ledger else ledger.create_session(
                sub, strict=False, by=by,
                reason=json.dumps({"format": importer.format, "source": str(source), "parent": name, "kind": stream}))
            w = streams[stream] = SessionWriter(s, report, counter=ledger.counter)
        return w

    def commit(line: int, offset: int) -> None:
        unknown = dict(known_unknown)
        for k, v in report.unknown.items():
            unknown[k] = unknown.get(k, 0) + v
        note = msgspec.json.encode(Checkpoint(
            format=importer.format, source=str(source.resolve()), line=line, offset=offset,
            fingerprint=importer.fingerprint(source, offset), unknown=unknown,
            bad_lines=known_bad + report.bad_lines,
        )).decode()
        for w in list(streams.values()):
            w.commit(note, by=by)

    seen = ctx.safe_line
    for item in importer.parse(importer.read(source, start, ctx, follow=follow), ctx):
        if ctx.safe_line != seen:  # a line boundary: everything queued so far is whole lines
            seen = ctx.safe_line
            if any(w.pending >= CHUNK for w in streams.values()):
                commit(ctx.safe_line, ctx.safe_offset)
        if type(item) is not Bad:
            writer(item.stream).add(item)
    commit(ctx.safe_line, ctx.safe_offset)
    report.first_line = first + 1
    report.last_line = ctx.safe_line
    report.sessions = [w.session.name for w in streams.values()]
    report.seconds = time.perf_counter() - t0
    return session, report


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


def _item_time(item: Any) -> Any:
    """An item's original time, if its meta has a readable one (else None)."""
    meta = getattr(item, "meta", None)
    raw = meta.get("timestamp") if isinstance(meta, dict) else None
    if raw is None:
        return None
    try:
        return validate.moment(raw)
    except InvalidInputError:
        return None
