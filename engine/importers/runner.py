"""Running an importer: which transcripts, which sessions, the validating pass, the writing pass, the
checkpoint. Shared by every format, the CLI's ``import`` and ``watch``."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine import validate
from engine.errors import DuplicateSessionError, ImportFormatError, InvalidInputError, LedgerError, StorageError
from engine.importers.items import CHUNK, Bad, Compact, Forget, ImportReport, ImportResult, Observe, ParseContext
from engine.importers.source import Checkpoint, pinned, replaced, session_info
from engine.importers.writer import SessionWriter, item_time

if TYPE_CHECKING:
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = ["run_import", "import_transcript"]


def run_import(importer: Any, ledger: Ledger, path: Path, *, name: str | None = None,
               skip_bad: bool = False, follow: bool = False) -> ImportResult:
    """Import every transcript ``importer`` finds at ``path`` (a file or a directory).

    A transcript that cannot be imported stops a directory import, the error saying which
    transcripts before it were imported; under ``skip_bad`` it is reported (``ImportReport.error``,
    ``ImportResult.failed``) and the rest are imported."""
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
    written: dict[str, Session] = {}  # the sessions the import wrote through, by name (not read again)
    for source in sources:
        primary = name or str(source)
        try:
            primary = name or _first_line_hook(importer.default_name, source)
            done = import_transcript(importer, ledger, source, primary, _first_line_hook(importer.session_info, source),
                                     skip_bad=skip_bad, follow=follow, with_children=True)
        except StorageError:
            raise  # the store, not this transcript: nothing after it would fare better
        except LedgerError as e:
            if len(sources) == 1:
                raise
            if not skip_bad:
                raise _amended(e, _imported_before(reports, len(sources))) from None
            reports.append(ImportReport(format=importer.format, source=str(source), session=primary, error=e.message))
            continue
        reports.extend(r for _, r in done)
        written.update((session.name, session) for session, _ in done)
    names: list[str] = []
    for r in reports:  # each transcript's session, then its sidechain sessions
        if not r.error:
            names.extend(n for n in (r.sessions or [r.session]) if n not in names)
    return ImportResult([written.get(n) or ledger.session(n) for n in names], reports)


def _first_line_hook(hook: Any, source: Path) -> Any:
    """An importer hook that reads the transcript's first line (its name, its info)."""
    try:
        return hook(source)
    except RecursionError:
        raise ImportFormatError(f"{source}: line 1: nested too deep to decode; nothing was imported", line=1) from None
    except OSError as e:
        raise ImportFormatError(f"{source}: cannot be read ({e.strerror or type(e).__name__}); "
                                "nothing was imported from it") from None


def _imported_before(reports: list[ImportReport], total: int) -> str:
    done = [r for r in reports if not r.error]
    if not done:
        return f"no transcript of the {total} was imported (--skip-bad skips bad lines and transcripts)"
    return (f"{len(done)} transcript(s) before it were imported ({', '.join(repr(r.session) for r in done[:3])}"
            f"{', ...' if len(done) > 3 else ''}); the rest were not tried (--skip-bad goes on past it)")


def _amended(e: LedgerError, note: str) -> LedgerError:
    """The same error, its message followed by ``note``."""
    out = copy.copy(e)
    out.message = f"{e.message}; {note}"
    out.args = (out.message,)
    return out


def import_transcript(importer: Any, ledger: Ledger, source: Path, name: str, info: dict[str, Any], *,
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
    cursor = [0, 0]  # the line of the last record a parser took, the last line committed
    try:
        with pinned(source) as pin:
            out.insert(0, _import_one(importer, ledger, source, name, info, links, pin, cursor,
                                      skip_bad=skip_bad, follow=follow))
    except OSError as e:  # unreadable (permissions, a FIFO that went away, an I/O error)
        raise ImportFormatError(f"{source}: cannot be read ({e.strerror or type(e).__name__}); "
                                "nothing was imported from it") from None
    except RecursionError:  # a parser that decodes JSON itself, not through source.decode_line
        done = f"lines up to {cursor[1]} were imported before it" if cursor[1] else "nothing was imported"
        raise ImportFormatError(f"{source}: line {cursor[0] + 1}: nested too deep to decode; {done}",
                                line=cursor[0] + 1) from None
    return out


def _import_one(importer: Any, ledger: Ledger, source: Path, name: str, info: dict[str, Any],
                links: dict[str, str], pin: Any, cursor: list[int], *, skip_bad: bool,
                follow: bool) -> tuple[Session, ImportReport]:
    """``cursor`` is kept at [the line of the last record a parser took, the last line committed]."""
    t0 = time.perf_counter()
    by = f"ctxledger-import:{importer.format}"
    session = ledger.session(name) if name in ledger else None
    start = _resume_point(importer, session, source, name, by)

    # Pass 1: parse every new line, write nothing (a malformed line, or an item the session would
    # refuse, raises here). It reads the file as it is now; pass 2 reads no further than pass 1 did.
    dry = ImportReport(format=importer.format, source=str(source), session=name)
    ctx = ParseContext(source, dry, skip_bad=skip_bad, info=info)
    ctx.links = links
    cursor[0] = start.line if start else 0
    began = None  # the transcript's own time of its first item: when the session really started
    for _item in _checked(importer.parse(_track(importer.read(source, start, ctx, follow=follow), cursor), ctx),
                          ctx, cursor, None):
        if began is None:
            began = item_time(_item)
    last_line, reached = cursor[0], ctx.reached

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

    # Pass 2: the same parse of the same bytes, written a chunk at a time; each chunk's transaction
    # ends with the checkpoint, so an interrupted import resumes exactly where its last chunk ended.
    if session is None:
        session = ledger.create_session(name, strict=False, by=by, happened_at=began,
                                        reason=json.dumps({"format": importer.format, "source": str(source), **info}))
    ctx = ParseContext(source, report, skip_bad=skip_bad, info=info)
    ctx.links = links
    ctx.until = reached if reached else None
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
        ctx.written_through = cursor[1] = line

    cursor[0] = first
    records = _upto(importer.read(source, start, ctx, follow=follow), last_line, cursor)
    seen = ctx.safe_line
    for item in _checked(importer.parse(records, ctx), ctx, cursor, set(dry.bad_lines)):
        if ctx.safe_line != seen:  # a line boundary: everything queued so far is whole lines
            seen = ctx.safe_line
            if any(w.pending >= CHUNK for w in streams.values()):
                commit(ctx.safe_line, ctx.safe_offset)
        if type(item) is not Bad:
            writer(item.stream).add(item)
    commit(ctx.safe_line, ctx.safe_offset)
    if pin is not None and replaced(source, pin):
        report.notes.append(f"{source} was replaced or removed during the import: what was imported (and the "
                            "checkpoint's fingerprint) is the file as it was when the import began")
    report.pending_tail = report.pending_tail or dry.pending_tail  # pass 2 stopped before that tail
    report.first_line = first + 1
    report.last_line = ctx.safe_line
    report.sessions = [w.session.name for w in streams.values()]
    report.seconds = time.perf_counter() - t0
    return session, report


def _track(records: Iterator[tuple[int, int, Any]], cursor: list[int]) -> Iterator[tuple[int, int, Any]]:
    """The records, noting in ``cursor`` the line of the last one taken."""
    for record in records:
        cursor[0] = record[0]
        yield record


def _upto(records: Iterator[tuple[int, int, Any]], last: int, cursor: list[int]) -> Iterator[tuple[int, int, Any]]:
    """The records up to line ``last`` (the validating pass's last), nothing the file grew since."""
    try:
        for record in records:
            if record[0] > last:
                return
            cursor[0] = record[0]
            yield record
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()


def _checked(items: Iterator[Any], ctx: ParseContext, cursor: list[int], lines: set[int] | None) -> Iterator[Any]:
    """The items, each checked as the session will check it (on ``lines`` only, when given): one it
    would refuse is a bad line (an error, or skipped under ``skip_bad``), never a half-written import."""
    for item in items:
        if type(item) is not Bad and (lines is None or cursor[0] in lines):
            why = _refusal(item)
            if why is not None:
                yield ctx.bad(cursor[0], why)
                continue
        yield item


def _refusal(item: Any) -> str | None:
    """Why the session would refuse an item (None: it would not)."""
    try:
        for obs in _observations(item):
            validate.text(obs.text)
            validate.role(obs.role)
            validate.tool_shape(obs.role, obs.kind, validate.meta(obs.meta))
        t = type(item)
        if t is Compact:
            if item.text is not None:
                validate.text(item.text, "the summary")
            validate.meta(item.meta)
        elif t is Forget:
            if item.summary is not None:
                validate.text(item.summary, "the summary")
            validate.meta(item.meta)
    except InvalidInputError as e:
        return e.message
    return None


def _observations(item: Any) -> list[Observe]:
    t = type(item)
    if t is Observe:
        return [item]
    if t is Compact:
        return [*item.inputs, *(item.after if not callable(item.after) else ())]
    return []


def _resume_point(importer: Any, session: Session | None, source: Path, name: str, by: str) -> Checkpoint | None:
    """The checkpoint to continue from (None: from the start), or the error for a name that holds
    something else. A session this importer created whose first chunk never committed (the
    import was killed in between) holds nothing but its start: the import takes it over."""
    if session is None:
        return None
    cp = Checkpoint.of(session)
    info = session_info(session)
    if cp is None and session.position == 1 and session.event(1).by == by and info.get("format") == importer.format:
        return None
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
