"""What every transcript importer shares: the items a parser yields, the report, and the writer that
turns items into session commands.

An importer reads its source twice. The first pass parses every new line without writing anything,
so a malformed line stops the import before the store is touched (``ImportFormatError`` naming the
file and line). The second pass parses again and writes, a chunk of items per transaction, so memory
stays flat in the transcript's size. Every write transaction ends with the checkpoint mark (``imported``)
whose reason records the source, the last line and byte offset taken and a fingerprint of the bytes
before it: a re-import or a restarted watch resumes after that line (nothing doubled, nothing
skipped), and a different transcript under the same name is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine import validate
from engine.errors import ImportFormatError, InvalidInputError
from engine.spans import Provenance, Span

if TYPE_CHECKING:
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = [
    "Observe",
    "Compact",
    "Forget",
    "Bad",
    "Apply",
    "ImportReport",
    "ImportResult",
    "Checkpoint",
    "Importer",
    "SessionWriter",
    "jsonl_lines",
    "fingerprint",
    "CHECKPOINT_LABEL",
    "MAX_TEXT_CHARS",
    "meta_arguments",
]

CHECKPOINT_LABEL = "imported"  # the mark whose reason holds the checkpoint (moved at every commit)
MAX_TEXT_CHARS = 2_000_000  # longer texts (a huge tool output) are cut and say so in meta
MAX_META_ARGS = 64 * 1024  # tool arguments beyond this stay in the span's text only
CHUNK = 2048  # items per write transaction (one fsync each; a few MB of queued text at most)


# -- the items a parser yields -------------------------------------------------------------------


class Observe:
    """An observation: ``category`` is what the report counts it as (user, assistant, tool_call,
    tool_result, thinking, harness, queued, ...)."""

    __slots__ = ("text", "role", "kind", "meta", "category", "stream")

    def __init__(self, text: str, role: str, kind: str, meta: dict, category: str, stream: str = ""):
        self.text, self.role, self.kind, self.meta = text, role, kind, meta
        self.category, self.stream = category, stream


class Compact:
    """A compaction: every live span for which ``keep`` is false becomes a source of one derived
    span ``text`` written ``by`` the tool; ``after`` are observations that follow it (harness text).
    ``text`` None means the summary is not readable (the spans are only pruned). ``keep`` gets the
    live spans in order and returns the ids that stay live (a partial compaction's preserved part);
    ``after`` may also be a function of the live spans (a replacement history's new items).
    ``inputs`` are what the summarizer was given besides the live spans (its prompt, the user's
    compaction instruction, context a hook injected): observed first, unless a live span already
    holds the same text, so that they are among the summary's sources."""

    __slots__ = ("text", "by", "meta", "keep", "after", "stream", "role", "inputs")

    def __init__(
        self,
        text: str | None,
        by: str,
        meta: dict,
        keep: Callable[[list[Span]], set[str]] | None = None,
        after: Iterable[Observe] | Callable[[list[Span]], list[Observe]] = (),
        stream: str = "",
        role: str = "user",
        inputs: Iterable[Observe] = (),
    ):
        self.text, self.by, self.meta, self.keep = text, by, meta, keep
        self.after = after if callable(after) else list(after)
        self.stream, self.role = stream, role
        self.inputs = list(inputs)


class Forget:
    """Prune the live spans whose ``meta[key]`` is in ``ids``; with ``summary``, they (and the live
    summaries written by the same tool before, which the summarizer also read) become one derived
    span instead."""

    __slots__ = ("key", "ids", "summary", "by", "meta", "stream")

    def __init__(self, key: str, ids: set, summary: str | None, by: str, meta: dict, stream: str = ""):
        self.key, self.ids, self.summary, self.by, self.meta, self.stream = key, ids, summary, by, meta, stream


class Apply:
    """Anything else a parser needs done to the session: ``fn(session, report)``, called in order
    (after the observations before it are written); never called in the validating pass."""

    __slots__ = ("fn", "stream")

    def __init__(self, fn: Callable[[Any, Any], None], stream: str = ""):
        self.fn, self.stream = fn, stream


class Bad:
    """A malformed line skipped under ``skip_bad``."""

    __slots__ = ("line", "why")

    def __init__(self, line: int, why: str):
        self.line, self.why = line, why


# -- report and result ----------------------------------------------------------------------------


class ImportReport(msgspec.Struct, kw_only=True):
    """What one import run read, wrote and skipped (per transcript; ``total`` merges several)."""

    format: str
    source: str
    session: str = ""
    sessions: list[str] = []
    first_line: int = 0  # the first line this run read (1-based); 0 when there was nothing new
    last_line: int = 0  # the last line taken (the checkpoint)
    lines: int = 0  # lines read in this run
    bytes: int = 0
    observed: dict[str, int] = {}  # spans written, by category
    tokens: int = 0
    skipped: dict[str, int] = {}  # lines with no model-visible content, by line type
    unknown: dict[str, int] = {}  # line types this importer does not know (kept in the checkpoint note)
    bad_lines: list[int] = []  # malformed lines skipped under --skip-bad
    compactions: int = 0
    pruned: int = 0  # spans the source dropped without a summary
    violations: int = 0  # compactions whose input held an earlier summary (summary of a summary)
    already_imported: bool = False  # nothing new: the checkpoint already covered the whole source
    pending_tail: bool = False  # an unterminated last line was left for later (a writer mid-line)
    notes: list[str] = []
    seconds: float = 0.0

    @property
    def spans(self) -> int:
        return sum(self.observed.values())

    @classmethod
    def total(cls, reports: list[ImportReport]) -> ImportReport:
        if len(reports) == 1:
            return reports[0]
        out = cls(
            format=",".join(sorted({r.format for r in reports})),
            source=", ".join(r.source for r in reports),
            session=reports[0].session if reports else "",
            first_line=reports[0].first_line if reports else 0,
            last_line=reports[0].last_line if reports else 0,
        )
        for r in reports:
            out.sessions.extend(s for s in r.sessions if s not in out.sessions)
            out.lines += r.lines
            out.bytes += r.bytes
            out.tokens += r.tokens
            out.compactions += r.compactions
            out.pruned += r.pruned
            out.violations += r.violations
            out.bad_lines.extend(r.bad_lines)
            out.notes.extend(r.notes)
            out.seconds += r.seconds
            for mine, theirs in ((out.observed, r.observed), (out.skipped, r.skipped), (out.unknown, r.unknown)):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + v
        out.already_imported = bool(reports) and all(r.already_imported for r in reports)
        out.pending_tail = any(r.pending_tail for r in reports)
        return out

    def summary(self) -> str:
        """A few human-readable lines."""
        if self.already_imported:
            return f"{self.source}: already imported into {self.session!r} up to line {self.last_line}; nothing new"
        kinds = ", ".join(f"{v} {k}" for k, v in sorted(self.observed.items(), key=lambda kv: -kv[1]))
        lines = [
            f"{self.source} ({self.format}) -> {', '.join(repr(s) for s in self.sessions) or repr(self.session)}: "
            f"lines {self.first_line}..{self.last_line}, {self.spans} spans ({kinds or 'none'}), "
            f"{self.tokens:,} tokens, {self.compactions} compaction(s)"
            + (f", {self.pruned} pruned" if self.pruned else "")
            + (f", {self.violations} summary-of-a-summary violation(s)" if self.violations else "")
        ]
        if self.skipped:
            lines.append("  skipped (no model-visible content): " + _counts(self.skipped))
        if self.unknown:
            lines.append("  unknown line types (counted, noted in the checkpoint): " + _counts(self.unknown))
        if self.bad_lines:
            shown = ", ".join(map(str, self.bad_lines[:10])) + (" ..." if len(self.bad_lines) > 10 else "")
            lines.append(f"  malformed lines skipped (--skip-bad): {len(self.bad_lines)} (line {shown})")
        if self.pending_tail:
            lines.append("  the last line is not complete yet: left for the next import")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


class ImportResult:
    """``session``: the primary session; ``sessions``: every session written (sidechains, subagents,
    further transcripts); ``report``: the merged report; ``reports``: one per transcript."""

    def __init__(self, sessions: list[Session], reports: list[ImportReport]):
        self.sessions = sessions
        self.session = sessions[0] if sessions else None
        self.reports = reports
        self.report = ImportReport.total(reports)

    def summary(self) -> str:
        """One block per transcript imported."""
        return "\n".join(r.summary() for r in self.reports)

    def __repr__(self) -> str:
        return f"ImportResult(sessions={[s.name for s in self.sessions]!r})"


# -- reading JSONL -------------------------------------------------------------------------------


def jsonl_lines(
    path: Path, *, offset: int = 0, line: int = 0, require_newline: bool = False
) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, end offset, raw line)`` from byte ``offset`` (where line ``line`` ended).

    An unterminated last line is yielded only when ``require_newline`` is false (the caller decides
    whether it parses; a live writer may be mid-line)."""
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            line += 1
            offset += len(raw)
            if not raw.endswith(b"\n") and require_newline:
                return
            yield line, offset, raw


def fingerprint(path: Path, offset: int) -> str:
    """A constant-cost fingerprint of the first ``offset`` bytes of a file: its length and its first
    and last 64 KiB. Enough to tell an appended-to transcript from a different one."""
    h = hashlib.sha256(str(offset).encode())
    with open(path, "rb") as f:
        h.update(f.read(min(offset, 65536)))
        if offset > 65536:
            f.seek(max(65536, offset - 65536))
            h.update(f.read(offset - max(65536, offset - 65536)))
    return h.hexdigest()[:32]


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


# -- the writer -------------------------------------------------------------------------------------


class SessionWriter:
    """Applies a parser's items to one session. Items wait in a queue; ``commit`` writes them in order
    in ONE transaction together with the checkpoint (so a crash or Ctrl-C never leaves spans the
    checkpoint does not cover): observations with their tokens counted in a batch, compactions as
    rewrites of the live spans, forgotten events as prunes."""

    def __init__(self, session: Session | None, report: ImportReport, *, counter: Any = None):
        self.session = session
        self.report = report
        self.dry = session is None  # the validating first pass: parse, write nothing
        self._queue: list[Any] = []
        self._count_many = getattr(counter, "count_many", None)
        self._count = getattr(counter, "count", None)
        self.derived_by: dict[str, str] = {}
        self._time_raw: Any = None
        self._last_time: datetime | None = None

    def add(self, item: Any) -> None:
        self._queue.append(item)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def commit(self, checkpoint: str | None = None, *, by: str = "") -> None:
        queue, self._queue = self._queue, []
        if self.dry:
            return
        if not queue and checkpoint is None:
            return
        observed = [i for i in queue if type(i) is Observe]
        for c in queue:
            if type(c) is Compact:
                observed.extend(c.inputs)
                if not callable(c.after):
                    observed.extend(c.after)
        texts = [i.text for i in observed]
        if self._count_many is not None:
            counts = self._count_many(texts)
        else:
            counts = [self._count(t) if self._count else None for t in texts]
        tokens = {id(item): n for item, n in zip(observed, counts)}
        s = self.session
        with s.batch():
            for item in queue:
                t = type(item)
                # each event keeps the transcript's own time (the append time goes to ``recorded``)
                with s.happened_at(self._time(item)):
                    if t is Observe:
                        self._observe(item, tokens.get(id(item)))
                    elif t is Compact:
                        self._compact(item, tokens)
                    elif t is Forget:
                        self._forget(item)
                    elif t is Apply:
                        item.fn(s, self.report)
            if checkpoint is not None:
                with s.happened_at(self._last_time):
                    s.mark(CHECKPOINT_LABEL, by=by, reason=checkpoint)

    def _time(self, item: Any) -> datetime | None:
        """The original time of an item: its meta's ``timestamp`` (ISO 8601 or epoch seconds), when
        it has a readable one; the last one seen is the time of the checkpoint that follows."""
        meta = getattr(item, "meta", None)
        raw = meta.get("timestamp") if isinstance(meta, dict) else None
        if raw is None or isinstance(raw, bool):
            return None
        if raw == self._time_raw:
            return self._last_time
        try:
            when = (datetime.fromtimestamp(raw, timezone.utc) if isinstance(raw, (int, float))
                    else validate.moment(raw))
        except (InvalidInputError, ValueError, OverflowError, OSError):
            return None
        self._time_raw, self._last_time = raw, when
        return when

    def _observe(self, item: Observe, tokens: int | None) -> None:
        span = self.session.observe(item.text, role=item.role, kind=item.kind, meta=item.meta, tokens=tokens)
        obs = self.report.observed
        obs[item.category] = obs.get(item.category, 0) + 1
        self.report.tokens += span.tokens

    def _compact(self, item: Compact, tokens: dict[int, int]) -> None:
        self.report.compactions += 1
        s = self.session
        if item.inputs:
            held = {sp.text for sp in s.spans()}
            for obs in item.inputs:
                if obs.text not in held:
                    held.add(obs.text)
                    self._observe(obs, tokens.get(id(obs)))
        live = s.spans()
        kept = item.keep(live) if item.keep else set()
        after = item.after(live) if callable(item.after) else item.after
        inputs = [sp for sp in live if sp.id not in kept]
        if item.text is not None and inputs:
            self._rewrite(inputs, item.text, item.by, item.meta, item.role)
        elif item.text is not None:
            # Nothing live to derive from (the transcript starts after a compaction): the summary is
            # all there is; keep it, observed, and say so.
            s.observe(item.text, role=item.role, kind="message", meta={**item.meta, "summary_without_sources": True})
            self.report.observed["summary"] = self.report.observed.get("summary", 0) + 1
            self.report.notes.append(f"a {item.by} summary had no live spans to derive from; kept as an observation")
        else:
            for sp in inputs:
                s.prune(sp.id, by=item.by, reason="compaction (summary not readable)")
            self.report.pruned += len(inputs)
        for obs in after:
            self._observe(obs, tokens.get(id(obs)))

    def _forget(self, item: Forget) -> None:
        s = self.session
        live = s.spans()
        forgotten = [sp for sp in live if sp.meta.get(item.key) in item.ids]
        if item.summary is None:
            for sp in forgotten:
                s.prune(sp.id, by=item.by, reason="forgotten by the condenser")
            self.report.pruned += len(forgotten)
            return
        self.report.compactions += 1
        chosen = {sp.id for sp in forgotten}
        earlier = [sp for sp in live if sp.provenance is Provenance.DERIVED and sp.id not in chosen
                   and self.derived_by.get(sp.id, sp.meta.get("by")) == item.by]
        inputs = sorted(forgotten + earlier, key=lambda sp: sp.order)
        if inputs:
            self._rewrite(inputs, item.summary, item.by, item.meta, "user")
        else:
            s.observe(item.summary, role="user", meta={**item.meta, "summary_without_sources": True})
            self.report.observed["summary"] = self.report.observed.get("summary", 0) + 1

    def _rewrite(self, inputs: list[Span], text: str, by: str, meta: dict, role: str) -> str:
        if any(sp.provenance is not Provenance.OBSERVED for sp in inputs):
            self.report.violations += 1
        meta = {**meta, "by": by}
        span = self.session.rewrite([sp.id for sp in inputs], text, by=by, meta=meta, role=role,
                                    reason="compaction recorded in the transcript")
        self.derived_by[span.id] = by
        return span.id


# -- the importer base ----------------------------------------------------------------------------


class Importer:
    """One transcript format. Subclasses set ``format`` and implement ``detect``, ``transcripts``
    (the source files/dirs under a path), ``default_name`` and ``parse``."""

    format = ""

    def detect(self, path: Path) -> bool:
        raise NotImplementedError

    def run(self, ledger: Ledger, path: Any, *, name: str | None = None, skip_bad: bool = False,
            follow: bool = False):
        from engine.importers.runner import run_import

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


class ParseContext:
    """What a parser needs besides its records: the report (for skipped/unknown counts), whether
    malformed lines are skipped, and the last safe line/offset (a checkpoint never splits a
    compaction from its summary)."""

    def __init__(self, source: Path, report: ImportReport, *, skip_bad: bool, info: dict[str, Any] | None = None):
        self.source = source
        self.report = report
        self.skip_bad = skip_bad
        self.safe_line = 0
        self.safe_offset = 0
        self.info = info or {}
        self.links: dict[str, str] = {}

    def skip(self, what: str) -> None:
        d = self.report.skipped
        d[what] = d.get(what, 0) + 1

    def unknown(self, what: str) -> None:
        d = self.report.unknown
        d[what] = d.get(what, 0) + 1

    def bad(self, line: int, why: str) -> Bad:
        """A malformed line: raise, or (``skip_bad``) count it and go on."""
        if not self.skip_bad:
            raise ImportFormatError(f"{self.source}: line {line}: {why}; nothing was imported", line=line)
        self.report.bad_lines.append(line)
        return Bad(line, why)

    def taken(self, line: int, offset: int) -> None:
        self.safe_line, self.safe_offset = line, offset


def decode_error(e: Exception) -> str:
    text = str(e)
    return "".join(c if c.isprintable() else " " for c in text)[:200]


def clip(text: str, meta: dict) -> str:
    """Text fit for a span: cut past MAX_TEXT_CHARS (noted in meta)."""
    if len(text) > MAX_TEXT_CHARS:
        meta["truncated_from_chars"] = len(text)
        return text[:MAX_TEXT_CHARS]
    return text


_msgpack = msgspec.msgpack.Encoder()


def meta_arguments(args: Any, encoded: str) -> Any:
    """Tool arguments fit for a span's meta: the object itself when the log's encoding can hold
    it, else its JSON text (integers beyond 64 bits, for example)."""
    try:
        _msgpack.encode(args)
    except (OverflowError, TypeError):
        return encoded
    return args


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"a session name must be a non-empty str, not {name!r}")
    return name


def file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0



def jsonl_records(
    path: Path, start: Checkpoint | None, ctx: ParseContext, decode: Callable[[bytes], Any], *, follow: bool
) -> Iterator[tuple[int, int, Any]]:
    """Decoded JSONL records after the checkpoint: ``(line, end offset, record)``, where a record
    that does not decode is the exception itself (the parser decides: error or ``--skip-bad``).

    An unterminated last line that does not decode is a writer caught mid-line: it is left for the
    next run (``pending_tail``), never an error. Following a live file (``follow``), only complete
    lines are read."""
    offset, line = (start.offset, start.line) if start else (0, 0)
    for number, end, raw in jsonl_lines(path, offset=offset, line=line, require_newline=follow):
        ctx.report.lines += 1
        ctx.report.bytes += len(raw)
        if not raw.strip():
            ctx.taken(number, end)
            continue
        try:
            record = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
            if not raw.endswith(b"\n"):
                ctx.report.pending_tail = True
                ctx.report.lines -= 1
                ctx.report.bytes -= len(raw)
                return
            record = e
        yield number, end, record
