"""What a transcript parser works with: the items it yields (observations, compactions, forgotten
events, anything else to apply), the context it parses in (the report it counts into, whether bad
lines are skipped, where it is safe to checkpoint) and the report of a run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine import validate
from engine.errors import ImportFormatError, InvalidInputError
from engine.spans import Span

if TYPE_CHECKING:
    from engine.session import Session

__all__ = [
    "Observe",
    "Compact",
    "Forget",
    "Apply",
    "Bad",
    "ImportReport",
    "ImportResult",
    "ParseContext",
    "MAX_TEXT_CHARS",
    "MAX_META_ARGS",
    "CHUNK",
    "decode_error",
    "clip",
    "meta_arguments",
    "check_name",
]

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
    error: str = ""  # why this transcript was not imported (a directory import goes on under --skip-bad)

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
            if r.error:
                out.notes.append(f"{r.source}: {r.error}")
        out.already_imported = bool(reports) and all(r.already_imported for r in reports)
        out.pending_tail = any(r.pending_tail for r in reports)
        return out

    def summary(self) -> str:
        """A few human-readable lines."""
        if self.error:
            return f"{self.source}: FAILED, nothing imported from it: {self.error}"
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

    @property
    def failed(self) -> list[ImportReport]:
        """The transcripts that were not imported (only under ``skip_bad``: else the first raises)."""
        return [r for r in self.reports if r.error]

    def summary(self) -> str:
        """One block per transcript imported."""
        return "\n".join(r.summary() for r in self.reports)

    def __repr__(self) -> str:
        return f"ImportResult(sessions={[s.name for s in self.sessions]!r})"


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
        self.until: int | None = None  # the byte offset the validating pass reached: read no further
        self.reached = 0  # the end of the last line read
        self.written_through = 0  # the last line a committed transaction covers (0: none this run)

    def skip(self, what: str) -> None:
        d = self.report.skipped
        d[what] = d.get(what, 0) + 1

    def unknown(self, what: str) -> None:
        d = self.report.unknown
        d[what] = d.get(what, 0) + 1

    def bad(self, line: int, why: str) -> Bad:
        """A malformed line: raise, or (``skip_bad``) count it and go on."""
        if not self.skip_bad:
            done = (f"lines up to {self.written_through} were imported before it (a re-run resumes there)"
                    if self.written_through else "nothing was imported")
            raise ImportFormatError(f"{self.source}: line {line}: {why}; {done}", line=line)
        bad = self.report.bad_lines
        if not bad or bad[-1] != line:
            bad.append(line)
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
    """Tool arguments fit for a span's meta (where they sit one level below meta itself): the
    object itself when the log can hold it, else its JSON text (integers beyond 64 bits, or
    nesting deeper than ``validate.MAX_META_DEPTH`` allows)."""
    limit = validate.MAX_META_DEPTH - 1
    if validate.nesting(args, limit) > limit:
        return encoded
    try:
        _msgpack.encode(args)
    except (OverflowError, TypeError):
        return encoded
    return args


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"a session name must be a non-empty str, not {name!r}")
    return name
