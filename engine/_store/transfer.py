"""Export and import: one JSON object per event, lossless, verified before anything is written.

A line is ``{"session": name, "session_id": uuid, "position": n, "type": "Observed", "hash": hex,
"event": {...}}``. ``hash`` is the event's chain hash (the next event's ``prev``); an import
re-encodes every event, recomputes every hash and the chain, replays the buffer, and writes
nothing unless all of it holds. A fork's file carries its parent's events up to the fork; those
are skipped when the parent is already in the target store with the same chain.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import msgspec

from engine import validate
from engine._store.chain import verify_chain
from engine._store.codec import chain_hash, encode_payload
from engine.errors import (
    ConcurrencyError,
    DuplicateSessionError,
    ImportFormatError,
    InvalidInputError,
)
from engine.events import (
    EVENT_TYPES,
    Event,
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    SessionStarted,
)
from engine.reading import LogReader
from engine.spans import OBSERVED_KINDS, Provenance
from engine._store.log_store import LogStore, session_uuid
from projections.buffer import apply

__all__ = [
    "export_lines",
    "write_export",
    "import_lines",
    "looks_like_export",
    "is_json_text",
    "parse_export",
    "check_chain",
    "ExportLine",
    "EVENT_DECODERS",
    "MAX_LINE_BYTES",
]

MAX_LINE_BYTES = 64 * 1024 * 1024


def _one_line(e: BaseException) -> str:
    """A dependency's error text fit for a one-line message (control characters escaped: the
    text can quote field names taken from hostile input)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e))


class ExportLine(msgspec.Struct, forbid_unknown_fields=True):
    """One line of an export file."""

    session: str
    session_id: UUID
    position: int
    type: str
    hash: str
    event: msgspec.Raw


_line_encoder = msgspec.json.Encoder()
_line_decoder = msgspec.json.Decoder(ExportLine)
EVENT_DECODERS = {name: msgspec.json.Decoder(cls) for name, cls in EVENT_TYPES.items()}


def export_lines(session: LogReader) -> Iterator[str]:
    """The session's whole history (a fork's includes its parent's events up to the fork)."""
    owner_id, owner_name = None, None
    for ev in session.events():
        if isinstance(ev, SessionStarted):
            owner_id, owner_name = ev.originator_id, ev.name
        plain = msgspec.structs.replace(ev, originator_id=None)
        line = {
            "session": owner_name,
            "session_id": str(owner_id),
            "position": ev.originator_version,
            "type": type(ev).__name__,
            "hash": chain_hash(encode_payload(plain)).hex(),
            "event": msgspec.Raw(_line_encoder.encode(plain)),
        }
        yield _line_encoder.encode(line).decode()


def is_json_text(source: Any) -> bool:
    """A str that holds JSON text (an object, an array, several lines) rather than a path."""
    return isinstance(source, str) and ("\n" in source or source.lstrip().startswith(("{", "[")))


def looks_like_export(source: Any) -> bool:
    """Whether ``source`` is meant as a ctxledger export: a stream, bytes or lines always are (the
    import then says precisely what is wrong with them); a file is when its first line is an export
    line's JSON object. A directory, or a file of another format, is not."""
    if not isinstance(source, (str, os.PathLike)) or is_json_text(source):
        return True
    path = Path(source)
    try:
        if not path.is_file():
            return not path.exists()
        with open(path, "rb") as f:
            for raw in f:
                if raw.strip():
                    first = msgspec.json.decode(raw)
                    return isinstance(first, dict) and {"session_id", "position", "event"} <= first.keys()
    except RecursionError:  # JSON nested too deep for anyone: the export's import says so
        return True
    except (OSError, ValueError):  # unreadable or not JSON: maybe another format's
        return False
    return True


def _read_lines(source: Any) -> Iterator[tuple[int, str]]:
    if is_json_text(source):
        raise ImportFormatError(
            "import reads a path, a text stream, bytes or an iterable of lines; this str looks like "
            "JSON text, not a path: wrap it in io.StringIO(text) or pass text.splitlines()"
        )
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, encoding="utf-8", errors="strict") as f:
                yield from _read_lines(f)
        except FileNotFoundError:
            raise ImportFormatError(f"no such file: {source}") from None
        except UnicodeDecodeError as e:
            raise ImportFormatError(f"{source} is not UTF-8 text ({e.reason} at byte {e.start})") from None
        except IsADirectoryError:
            raise ImportFormatError(f"{source} is a directory") from None
        except OSError as e:
            raise ImportFormatError(f"cannot read {source}: {e.strerror or e}") from None
        return
    if isinstance(source, (bytes, bytearray)):
        source = io.StringIO(bytes(source).decode("utf-8", errors="strict"))
    for number, raw in enumerate(source, 1):
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8")
        if len(raw) > MAX_LINE_BYTES:
            raise ImportFormatError(f"line {number} is longer than {MAX_LINE_BYTES:,} bytes", line=number)
        if raw.strip():
            yield number, raw


def parse_export(source: Any) -> list[tuple[int, ExportLine, Event]]:
    """Decode every line of an export (line number, line, event); ``ImportFormatError`` names the
    first bad line."""
    parsed = []
    try:
        for number, raw in _read_lines(source):
            try:
                line = _line_decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise ImportFormatError(f"line {number} is not a ctxledger export line: {_one_line(e)}", line=number) from None
            except RecursionError:
                raise ImportFormatError(f"line {number}: nested too deep to decode", line=number) from None
            decoder = EVENT_DECODERS.get(line.type)
            if decoder is None:
                raise ImportFormatError(f"line {number}: unknown event type {line.type!r}", line=number)
            try:
                ev = decoder.decode(line.event)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise ImportFormatError(f"line {number}: bad {line.type} event: {_one_line(e)}", line=number) from None
            except RecursionError:
                raise ImportFormatError(f"line {number}: the {line.type} event nests too deep to decode", line=number) from None
            if ev.originator_id is not None:
                raise ImportFormatError(f"line {number}: events carry no session id inside", line=number)
            parsed.append((number, line, ev))
    except UnicodeDecodeError as e:
        raise ImportFormatError(f"the input is not UTF-8 text ({e.reason})") from None
    if not parsed:
        raise ImportFormatError("the input holds no events")
    return parsed


def check_chain(parsed: list[tuple[int, ExportLine, Event]]) -> None:
    """Positions in sequence, each event matching its hash and chaining to the line before it."""
    prev = b""
    owner: ExportLine | None = None
    for index, (number, line, ev) in enumerate(parsed):
        expected = index + 1
        if line.position != expected or ev.originator_version != expected:
            raise ImportFormatError(
                f"line {number}: position {line.position} where {expected} was expected", line=number
            )
        payload = encode_payload(ev)
        digest = chain_hash(payload)
        if digest.hex() != line.hash:
            raise ImportFormatError(
                f"line {number}: the event does not match its hash (position {expected} was edited)",
                line=number,
                position=expected,
            )
        if ev.prev != prev:
            raise ImportFormatError(
                f"line {number}: position {expected} does not chain to the line before it "
                "(lines were removed, inserted or reordered)",
                line=number,
                position=expected,
            )
        prev = digest
        if isinstance(ev, SessionStarted):
            if expected != 1 and (ev.forked_from is None or ev.fork_position != expected - 1):
                raise ImportFormatError(f"line {number}: a session starts in the middle of the log", line=number)
            if ev.forked_from is not None and (owner is None or owner.session_id != ev.forked_from):
                raise ImportFormatError(f"line {number}: a fork of a session the file does not hold", line=number)
            if session_uuid(ev.name) != line.session_id or line.session != ev.name:
                raise ImportFormatError(f"line {number}: session name and id disagree", line=number)
            owner = line
        elif expected == 1:
            raise ImportFormatError(f"line {number}: the first event must be a SessionStarted", line=number)
        if owner is None or line.session_id != owner.session_id:
            raise ImportFormatError(f"line {number}: belongs to no session started before it", line=number)


def _check_replay(parsed: list[tuple[int, ExportLine, Event]]) -> None:
    """Fold the buffer over the whole file: an event that cannot apply is a malformed file."""
    events = [ev for _, _, ev in parsed]
    state = None
    for number, line, ev in parsed:
        if isinstance(ev, Rewritten) and (ev.violation or ev.generation > 1) and state is not None and state.strict:
            raise ImportFormatError(
                f"line {number}: a strict session cannot hold a rewrite of derived spans", line=number
            )
        _check_event(state, ev, number, events)
        try:
            state = apply(state, ev, lambda p: events[p - 1])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise ImportFormatError(
                f"line {number}: {line.type} at position {line.position} does not apply to the buffer "
                f"({type(e).__name__}: {_one_line(e)})",
                line=number,
            ) from None


def _check_event(state: Any, ev: Event, number: int, events: list[Event]) -> None:
    """Hold an imported event to the input rules the write side checks before it emits one: a
    file whose hashes were recomputed by hand must still hold valid text, roles, kinds, meta,
    labels, span ids in sequence, and prune/restore/expand pointers to the right events. What a
    rewrite claims about its sources is left to the audit to report (imported histories of
    other tools are audited, not refused)."""
    def bad(why: str) -> ImportFormatError:
        return ImportFormatError(f"line {number}: {type(ev).__name__} at position {ev.originator_version}: {why}", line=number)

    def live(span_id: str):
        span = state.live.get(span_id) if state is not None else None
        if span is None:
            raise bad(f"{span_id!r} is not a live span there")
        return span

    try:
        validate.optional_str(ev.by, "by")
        validate.optional_str(ev.reason, "reason", limit=100_000)
        t = type(ev)
        if t is SessionStarted:
            validate.label(ev.name, "session name")
            return
        if state is None:
            raise bad("the log does not start with SessionStarted")
        meta = getattr(ev, "meta", None)
        if meta is not None:  # every event's meta, bounded as when it is written (depth and size)
            validate.meta(meta)
        if t is RewriteRefused:
            validate.meta({"findings": list(ev.findings)})
        if t in (Observed, Rewritten, Rederived):
            validate.text(ev.text)
            validate.role(ev.role)
            if isinstance(ev.tokens, bool) or ev.tokens < 0:
                raise bad(f"tokens must be a non-negative int, not {ev.tokens!r}")
        if t is Observed:
            validate.kind(ev.kind, OBSERVED_KINDS)
            validate.tool_shape(ev.role, ev.kind, ev.meta)
            if ev.span_id != f"o{state.n_obs + 1}":
                raise bad(f"the next observed span is o{state.n_obs + 1}, not {ev.span_id!r}")
        elif t is Rewritten:
            # Its inputs must be live (the fold checks that); whether its sources, generation and
            # violation flag agree with them is the audit's to report, not a reason to refuse.
            if ev.span_id != f"d{state.n_der + 1}":
                raise bad(f"the next derived span is d{state.n_der + 1}, not {ev.span_id!r}")
            validate.span_ids(ev.inputs)
        elif t is Rederived:
            if live(ev.span_id).provenance is not Provenance.DERIVED:
                raise bad(f"{ev.span_id} is observed; only derived spans are re-derived")
        elif t is Pruned:
            if live(ev.span_id).position != ev.content_position:
                raise bad(f"content_position {ev.content_position} is not where {ev.span_id}'s text is")
        elif t is Restored:
            if ev.span_id in state.live:
                raise bad(f"{ev.span_id} is live already")
            if not 1 <= ev.content_position < ev.originator_version or getattr(
                events[ev.content_position - 1], "span_id", None) != ev.span_id or not isinstance(
                events[ev.content_position - 1], (Observed, Rewritten, Rederived)):
                raise bad(f"content_position {ev.content_position} does not hold {ev.span_id}'s text")
        elif t is Expanded:
            span = live(ev.span_id)
            if span.provenance is not Provenance.DERIVED or (tuple(ev.restored), tuple(ev.restored_positions)) != (
                span.sources, span.source_positions) or any(i in state.live for i in ev.restored):
                raise bad("an expansion restores exactly the derived span's sources, none of them live")
        elif t is Marked:
            validate.label(ev.label)
        elif t is RewriteRefused:
            if ev.command not in ("rewrite", "rederive"):
                raise bad(f"unknown command {ev.command!r}")
    except InvalidInputError as e:
        raise bad(e.message) from None


def import_lines(store: LogStore, source: Any) -> UUID:
    """Import an export (path, file, bytes or lines) into ``store``; returns the imported session's
    id. Writes nothing unless every check passes."""
    parsed = parse_export(source)
    check_chain(parsed)
    _check_replay(parsed)
    groups: dict[UUID, list[Event]] = {}
    for _, line, ev in parsed:
        groups.setdefault(line.session_id, []).append(ev)
    # Ancestors already in the store (a fork's parent) must be the same history; the imported
    # session itself must be new.
    target = parsed[-1][1]
    to_write: list[tuple[UUID, list[Event]]] = []
    for session_id, events in groups.items():
        if not store.head_version(session_id):
            to_write.append((session_id, events))
            continue
        name = next((ev.name for ev in events if isinstance(ev, SessionStarted)), str(session_id))
        if session_id == target.session_id:
            raise DuplicateSessionError(f"session {name!r} already exists in the store")
        check = verify_chain(store, session_id, events[-1].originator_version)
        if not check.ok or check.head != chain_hash(encode_payload(events[-1])).hex():
            raise DuplicateSessionError(f"a different session named {name!r} already exists in the store")
    for session_id, events in to_write:
        for ev in events:
            msgspec.structs.force_setattr(ev, "originator_id", session_id)
        try:
            store.put_events(events)
        except ConcurrencyError:
            raise DuplicateSessionError(f"session {session_id} was created by another writer meanwhile") from None
    return parsed[-1][1].session_id


def write_export(session: LogReader, out: IO[str] | str | Path) -> int:
    """Write ``session``'s export to a path or a text stream; returns the number of events."""
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8") as f:
            return write_export(session, f)
    n = 0
    for line in export_lines(session):
        out.write(line)
        out.write("\n")
        n += 1
    return n
