"""The Ledger: a store of sessions opened by URL, and the public entry to them."""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from engine import validate
from engine._store.chain import verify_chain
from engine.verification import VerifyResult
from engine._store.codec import MARK_TOPIC, TOPICS, chain_hash, encode_payload
from engine.errors import (
    ConcurrencyError,
    DuplicateSessionError,
    ImportFormatError,
    InvalidInputError,
    UnknownSessionError,
)
from engine.events import SessionStarted, now
from engine.session import Session
from engine._store.log_store import LogStore, redact, session_uuid, storage_error
from engine.tokens import TokenCounter, default_counter
from engine._store.transfer import import_lines, is_json_text, looks_like_export
from projections.buffer import BufferState, apply
from engine.grounding_cache import GroundingCache, open_cache

if TYPE_CHECKING:
    from projections.grounding.checker import Checker

__all__ = ["Ledger", "SessionInfo", "DEFAULT_URL", "session_uuid", "IMPORTERS_GROUP"]

DEFAULT_URL = "sqlite:///ctxledger.db"
IMPORTERS_GROUP = "ctxledger.importers"  # entry points: transcript formats ``Ledger.import_`` reads


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the store's sessions projection knows it, without opening the session:
    ``events`` it stored itself (a fork shares its parent's first positions), the original time of
    its first event (``started_at``) and of its head (``last_at``), the parent of a fork."""

    name: str
    id: UUID
    position: int
    strict: bool
    started_at: Any = None
    last_at: Any = None
    events: int = 0
    forked_from: UUID | None = None



class Ledger:
    """A store of sessions. ``Ledger.open(url)``; ``memory://``, ``sqlite:///file.db``,
    ``postgresql://user:pass@host:5432/db``. Without a URL: ``$CTXLEDGER_URL`` or ``./ctxledger.db``.

    ``store`` (an ``engine._store.log_store.LogStore``) is the extension point for code that reads the log in
    bulk or keeps its own projection beside it (the fleet view, search indexes)."""

    def __init__(self, store: LogStore, counter: TokenCounter, checker: Checker | None = None):
        self.store = store
        self.url = store.url
        self.counter = counter
        self.checker = checker  # the drift checker sessions audit and gate with (None: the lexical default)
        self._grounding_cache: GroundingCache | None = None
        # ``session()`` and ``verify()`` also take a unique short form of a name (``resolve``): on
        # for the command line, where names are typed; off for programs, which name sessions exactly
        self.short_names = False
        # how its sessions find blame's facts (engine.blame_index.install sets the search index's
        # finder; None: blame walks the log)
        self.blame_finder: Any = None

    @property
    def grounding_cache(self) -> GroundingCache:
        """The store's kept grounding results (``engine.grounding_cache``), opened on first use; the
        sessions this ledger opens audit and blame through it."""
        if self._grounding_cache is None:
            self._grounding_cache = open_cache(self.url, encrypted=self.encrypted)
        return self._grounding_cache

    @property
    def encrypted(self) -> bool:
        """Whether the store encrypts what it writes: its text must not be kept in plaintext beside it."""
        return self.store.encrypted

    @property
    def backend(self) -> str:
        """The kind of store: ``"sqlite"``, ``"postgres"`` or ``"memory"``."""
        return self.store.backend

    @property
    def display_url(self) -> str:
        """The store's URL with any password replaced, fit for messages and reports."""
        return redact(self.url)

    @staticmethod
    def looks_like_export(path: str) -> bool:
        """Whether the file at ``path`` reads as a ctxledger export (what ``import_`` takes without
        a format), rather than another tool's transcript."""
        return looks_like_export(path)

    # opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        token_counter: TokenCounter | None = None,
        cipher_key: str | None = None,
        checker: Checker | None = None,
    ) -> Ledger:
        """Open (or create) the store at ``url``. ``checker``: the drift checker for audits and the
        grounding gate (``projections.grounding.checker.Checker``; default the lexical checker)."""
        if checker is not None and not _is_checker(checker):
            raise InvalidInputError(f"checker must have a name and check(summary, sources), not {type(checker).__name__}")
        url = url or os.environ.get("CTXLEDGER_URL") or DEFAULT_URL
        return cls(LogStore.open(url, cipher_key=cipher_key), token_counter or default_counter(), checker)

    @property
    def snapshot_min_bytes(self) -> int:
        """Fewest bytes appended between two snapshots (a tuning knob for tests and benchmarks)."""
        return self.store.snapshot_min_bytes

    @snapshot_min_bytes.setter
    def snapshot_min_bytes(self, value: int) -> None:
        self.store.snapshot_min_bytes = value

    def close(self) -> None:
        if self._grounding_cache is not None:
            self._grounding_cache.close()
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {redact(self.url)}>"

    # sessions --------------------------------------------------------------------------------

    def create_session(self, name: str, *, strict: bool = True, by: str = "", reason: str = "",
                       happened_at: datetime | str | None = None) -> Session:
        """A new session with a unique name. ``strict=False`` records rule-breaking rewrites as
        violations instead of refusing them (for importing other tools' histories and baselines).
        ``happened_at``: when the session really started (an imported transcript's first time; the
        creation time is then kept in the event's ``recorded``)."""
        validate.label(name, "session name")
        if not isinstance(strict, bool):
            raise InvalidInputError(f"strict must be a bool, not {type(strict).__name__}")
        happened = validate.moment(happened_at, "happened_at") if happened_at is not None else None
        started = SessionStarted(
            originator_version=1, at=happened or now(), name=name, strict=strict,
            by=validate.optional_str(by, "by"), reason=validate.optional_str(reason, "reason"),
            recorded=None if happened is None else now(),
        )
        return self._start(started, None, b"")

    def fork(self, session: Session | str, *, at: int | str | None = None, name: str, by: str = "") -> Session:
        """A new session that starts from ``session``'s buffer at position ``at`` (default: its head)
        and shares its history: positions 1..at are the parent's events, the fork continues after."""
        parent = self.session(session) if isinstance(session, str) else session
        validate.label(name, "session name")
        n = parent.resolve_position(at)
        # The fork chains to the parent's event at n; `verify` of the fork walks the shared part too.
        head = chain_hash(self.store.plaintext(self.store.stored_row(parent.id, n)))
        started = SessionStarted(
            originator_version=n + 1, at=now(), name=name, strict=parent.strict,
            forked_from=parent.id, fork_position=n, prev=head,
            by=validate.optional_str(by, "by"), reason=f"fork of {parent.name!r} at position {n}",
        )
        return self._start(started, parent.state if n == parent.position else None, head)

    def _start(self, started: SessionStarted, parent_state: BufferState | None, prev: bytes) -> Session:
        name = started.name
        session_id = session_uuid(name)
        if self.store.exists(session_id):
            raise DuplicateSessionError(f"a session named {name!r} already exists")
        payload = encode_payload(started)
        msgspec.structs.force_setattr(started, "originator_id", session_id)
        if started.forked_from is not None:
            self.store.remember_fork(session_id, (started.forked_from, started.fork_position))
        state = self.store.fork_state(started, parent_state) if started.forked_from is not None else None
        state = apply(state, started, lambda p: self.store.read_event(session_id, p))
        session = Session.starting(self.store, self.counter, state, started, payload, checker=self.checker)
        session.grounding_cache = self.grounding_cache
        session.blame_finder = self.blame_finder
        try:
            self.store.save(session)
        except ConcurrencyError:
            self.store.forget_fork(session_id)
            raise DuplicateSessionError(f"a session named {name!r} already exists") from None
        return session

    def resolve(self, text: str) -> str:
        """The one session name ``text`` stands for: the name itself, else the only name that starts
        or ends with it, or whose part after a source prefix (``claude-code:``, ``codex:``...) starts
        with it — like git's short hashes (``fa812bfe`` for ``claude-code:fa812bfe-4c1e-...``); of a
        session and the sessions nested under it (``S/agent-…``), the session itself.
        Ambiguous: ``InvalidInputError`` listing the candidates; none: ``UnknownSessionError``."""
        if not isinstance(text, str) or not text:
            raise InvalidInputError(f"session name must be a non-empty str, not {text!r}")
        if self.store.exists(session_uuid(text)):
            return text
        names = [i.name for i in self.sessions()]
        found = [n for n in names if n.startswith(text) or n.endswith(text)
                 or any(part.startswith(text) for part in n.split(":")[1:])]
        if len(found) == 1:
            return found[0]
        # a session and the ones nested under it (``S/agent-acompact-…``, a compaction call's
        # transcript): the short form names the session itself
        outer = [n for n in found if all(m == n or m.startswith(n + "/") for m in found)]
        if len(outer) == 1:
            return outer[0]
        if not found:
            raise UnknownSessionError(f"no session named {text!r} in {redact(self.url)}")
        shown = ", ".join(repr(n) for n in found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
        raise InvalidInputError(f"{text!r} is ambiguous: {len(found)} sessions match ({shown}); type more of the name")

    def _short(self, name: str) -> str:
        """``name`` resolved when short names are on and no session has exactly this name."""
        if not self.short_names or self.store.exists(session_uuid(name)):
            return name
        with contextlib.suppress(ValueError):
            if self.store.exists(UUID(name)):
                return name  # a session id
        return self.resolve(name)  # a UUID may also be part of a name (a Claude Code session id)

    def session(self, name_or_id: str | UUID) -> Session:
        """Reopen a session by name (or UUID; with ``short_names``, a unique short form: ``resolve``)."""
        if isinstance(name_or_id, UUID):
            session_id = name_or_id
        elif isinstance(name_or_id, str) and name_or_id:
            name_or_id = self._short(name_or_id)
            session_id = session_uuid(name_or_id)
            with contextlib.suppress(ValueError):
                if not self.store.exists(session_id):
                    session_id = UUID(name_or_id)
        else:
            raise InvalidInputError(f"session name must be a non-empty str, not {name_or_id!r}")
        state, head = self.store.load(session_id, display=str(name_or_id))
        session = Session(self.store, self.counter, state, head, checker=self.checker)
        session.grounding_cache = self.grounding_cache
        session.blame_finder = self.blame_finder
        return session

    def __contains__(self, name: str) -> bool:
        return isinstance(name, str) and bool(name) and self.store.exists(session_uuid(name))

    def sessions(self) -> list[SessionInfo]:
        """Every session in the store, in creation order: name, id, position, strictness, event
        count, first and last original time. Reads the store's sessions projection
        (``engine._store.sessions_table``) and each session's start: O(sessions), however long the log."""
        rows = self.store.session_rows()
        if rows is None:
            return [self._from_log(ev) for ev in self.store.started_events()]
        out = []
        for r in rows:
            if r.first is None:
                continue  # no readable SessionStarted: like the log scan, sessions() lists readable starts
            # the start is read back (a primary-key read): a start deleted or garbled in the log is
            # not listed, as before, and an encrypted store's name comes from it
            first = self.store.session_event(r.id, r.first)
            if not isinstance(first, SessionStarted):
                continue
            last_at = r.last_at
            if last_at is None:
                last_at = getattr(self.store.session_event(r.id, r.position), "at", None)
            out.append(SessionInfo(name=first.name, id=r.id, position=r.position, strict=first.strict,
                                   started_at=first.at, last_at=last_at, events=r.events, forked_from=r.forked_from))
        return out

    def _from_log(self, ev: SessionStarted) -> SessionInfo:
        position = self.store.head_version(ev.originator_id)
        head = self.store.session_event(ev.originator_id, position)
        own = position - (ev.fork_position if ev.forked_from is not None else 0)
        return SessionInfo(name=ev.name, id=ev.originator_id, position=position, strict=ev.strict, started_at=ev.at,
                           last_at=getattr(head, "at", None), events=own, forked_from=ev.forked_from)

    def session_names(self) -> list[str]:
        """Every session with rows in the store, by name, or by id where its ``SessionStarted`` is
        unreadable or gone: what ``ctxledger verify --all`` checks (a session whose first event was
        deleted must still be verified, not skipped). ``sessions()`` lists only readable starts;
        this reads every row's header, so it takes time proportional to the whole store."""
        started = TOPICS[SessionStarted]
        seen: dict[UUID, str] = {}
        start = 0
        while True:
            try:
                page = self.store.notifications(start, 5000)
            except Exception as e:
                raise storage_error(e, "cannot list the sessions") from None
            for n in page:
                if n.topic == MARK_TOPIC:
                    continue
                name = seen.get(n.originator_id)
                if name is None or (n.topic == started and n.originator_version == 1):
                    try:
                        ev = self.store.decode(n) if n.topic == started else None
                    except Exception:
                        ev = None
                    readable = ev is not None and ev.originator_id is not None
                    seen[n.originator_id] = ev.name if readable else (name or str(n.originator_id))
            if len(page) < 5000:
                break
            start = page[-1].id
        return list(seen.values())

    def import_(self, source: Any, *, format: str | None = None, name: str | None = None, **options: Any) -> Session:
        """Import a session: a ctxledger export (``Session.export`` / ``ctxledger export``: a path, a
        text stream, bytes or an iterable of lines; verified whole before anything is written), or,
        with ``format`` (or detected from a path's content), another tool's transcript through the
        importer registered under that name in the ``ctxledger.importers`` entry-point group
        (``claude-code``, ``codex``, ``openhands``, ``messages``). Returns the imported session."""
        if format is not None and not isinstance(format, str):
            raise InvalidInputError(f"format must be a str, not {type(format).__name__}")
        importer = None
        if format is None and not looks_like_export(source):
            importer = _detect(_as_path(source))
        elif format not in (None, "ctxledger"):
            importer = _registered(format)
        if importer is None:  # a ctxledger export; a file nobody recognises gets the export's precise errors
            if name is not None or options:
                raise InvalidInputError("a ctxledger export keeps its own session name; name= and options do not apply")
            return self.session(import_lines(self.store, source))
        return importer.run(self, _as_path(source), name=name, **options).session

    def verify(self, session: str | UUID) -> VerifyResult:
        """Walk a session's hash chain as stored, without loading its buffer (so a log too damaged
        to replay can still be verified and the first bad position named)."""
        if isinstance(session, UUID):
            session_id = session
        elif isinstance(session, str) and session:
            session = self._short(session)
            session_id = session_uuid(session)
            if not self.store.head_version(session_id):
                with contextlib.suppress(ValueError):
                    session_id = UUID(session)
        else:
            raise InvalidInputError(f"session name must be a non-empty str, not {session!r}")
        if not self.store.head_version(session_id):
            raise UnknownSessionError(f"no session named {str(session)!r} in {redact(self.url)}")
        return verify_chain(self.store, session_id, None)


def _as_path(source: Any) -> Path:
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not is_json_text(source)):
        return Path(source)
    raise ImportFormatError("a transcript import reads a file or a directory: give its path")


def _importers() -> dict[str, Any]:
    from importlib.metadata import entry_points  # ~15 ms to import: only where a format is looked up

    return {ep.name: ep for ep in entry_points(group=IMPORTERS_GROUP)}


def _is_checker(checker: Any) -> bool:
    from projections.grounding.checker import Checker  # the checker loads with the first one given or used

    return isinstance(checker, Checker)


def _registered(format: str) -> Any:
    found = _importers()
    if format not in found:
        known = ", ".join(["ctxledger", *sorted(found)])
        raise InvalidInputError(f"unknown import format {format!r}; known formats: {known}")
    return found[format].load()


def _detect(path: Path) -> Any | None:
    """The first registered importer (by name) that recognises the file or directory, if any."""
    for _, ep in sorted(_importers().items()):
        importer = ep.load()
        try:
            if importer.detect(path):
                return importer
        except Exception:  # noqa: BLE001 - a detector choking on hostile bytes has not recognised them
            continue
    return None
