"""The Ledger: an eventsourcing Application that opens a store by URL and holds sessions."""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse
from uuid import NAMESPACE_URL, UUID, uuid5

import msgspec
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import (
    IntegrityError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.utils import Environment

from engine import validate
from engine.codec import (
    MARK_TOPIC,
    TOPICS,
    EventMapper,
    LedgerMark,
    SessionSnapshot,
    chain_hash,
    decode_payload,
)
from engine.errors import (
    ConcurrencyError,
    CorruptLogError,
    DuplicateSessionError,
    InvalidInputError,
    LedgerError,
    NotALedgerError,
    StorageError,
    StoreUnavailableError,
    UnknownSessionError,
)
from engine.events import Event, SessionStarted, now
from engine.session import Session, VerifyResult
from engine.stores import SQLITE_FACTORY, FastSQLiteApplicationRecorder
from engine.tokens import TokenCounter, default_counter
from projections.buffer import BufferState, apply, with_orders

__all__ = ["Ledger", "SessionInfo", "DEFAULT_URL", "session_uuid"]

DEFAULT_URL = "sqlite:///ctxledger.db"
_NS = uuid5(NAMESPACE_URL, "https://ctxledger.dev/")
_MARK_ID = uuid5(_NS, "ledger")
SNAPSHOT_MIN_BYTES = 32 * 1024
SNAPSHOT_LIVE_FACTOR = 2
LAST_POSITION = 2**62  # "to the end of the log" for range reads


def session_uuid(name: str) -> UUID:
    """Session ids are derived from the unique name: the store's primary key enforces uniqueness."""
    return uuid5(_NS, "session:" + name)


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    id: UUID
    position: int
    strict: bool
    started_at: Any = None


class _App(Application):
    """eventsourcing Application configured only by the URL (never by stray environment variables)."""

    name = "ctxledger"
    snapshot_class = SessionSnapshot

    def construct_env(self, name: str, env: Any = None) -> Environment:
        return Environment(name, dict(env or {}))

    def construct_mapper(self):
        return self.factory.mapper(transcoder=self.construct_transcoder(), mapper_class=EventMapper)

    def construct_transcoder(self):
        from eventsourcing.persistence import JSONTranscoder

        return JSONTranscoder()  # unused by EventMapper; eventsourcing wants one

    def save_session(self, session: Session) -> None:
        """``Application.save`` for one session. On SQLite the rows the session already encoded go
        straight to the recorder, with a due snapshot in the same transaction; elsewhere through
        ``events.put`` (without ``Application.save``'s per-call runtime Protocol checks, which
        cost more than the rest of a single-event save)."""
        events, payloads = session.take_pending()
        if not events:
            return
        recorder = self.recorder
        if isinstance(recorder, FastSQLiteApplicationRecorder):
            sid = session.id.hex
            if self.mapper.cipher or self.mapper.compressor:
                seal = self.mapper.seal
                payloads = [seal(TOPICS[type(ev)], p) for ev, p in zip(events, payloads)]
            params = [(sid, ev.originator_version, TOPICS[type(ev)], p) for ev, p in zip(events, payloads)]
            snapshot = None
            if self._snapshot_due(session):
                stored = self.mapper.to_stored_event(SessionSnapshot.take(session))
                snapshot = (
                    self.snapshots.recorder.insert_events_statement,
                    (stored.originator_id.hex, stored.originator_version, stored.topic, stored.state),
                )
            recorder.append(params, snapshot)
            if snapshot is not None:
                session.bytes_since_snapshot = 0
            return
        prepared = self.mapper.prepared
        for ev, payload in zip(events, payloads):
            prepared[id(ev)] = payload
        try:
            self.events.put(events)
        finally:
            for ev in events:
                prepared.pop(id(ev), None)
        if self._snapshot_due(session):
            with contextlib.suppress(PersistenceError):
                self.snapshots.put([SessionSnapshot.take(session)])
                session.bytes_since_snapshot = 0

    def _snapshot_due(self, session: Session) -> bool:
        # A snapshot costs about the live buffer's size (encoded and compressed) when it is written;
        # time travel loads the nearest one and replays the events after it. Taking one when the
        # bytes appended since the last exceed twice the live buffer's text bounds both: writing
        # snapshots costs at most half a live buffer's worth of work per byte appended, and time
        # travel replays at most two live buffers' worth of events (measured: median ~1-2 ms at
        # 10k..1M events, the target is 5 ms; with 1x the write path spent ~10% on snapshots).
        if self.snapshots is None:
            return False
        threshold = max(session._ledger.snapshot_min_bytes, SNAPSHOT_LIVE_FACTOR * session.state.text_bytes)
        return session.bytes_since_snapshot >= threshold


def _parse_url(url: str, cipher_key: str | None) -> tuple[dict[str, str], str]:
    """Map a store URL onto eventsourcing's persistence settings. Returns (env, sqlite path or '')."""
    if not isinstance(url, str) or not url:
        raise InvalidInputError(f"store URL must be a non-empty str, not {url!r}")
    env: dict[str, str] = {"IS_SNAPSHOTTING_ENABLED": "y"}
    key = cipher_key or os.environ.get("CTXLEDGER_CIPHER_KEY")
    key_file = os.environ.get("CTXLEDGER_CIPHER_KEY_FILE")
    if not key and key_file:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as e:
            raise StorageError(f"cannot read the cipher key file named by CTXLEDGER_CIPHER_KEY_FILE: {e.strerror}") from None
    if key:
        _check_cipher_key(key)
        env["CIPHER_TOPIC"] = "eventsourcing.cryptography:AESCipher"
        env["CIPHER_KEY"] = key
    if url == "memory://" or url == "memory:":
        env["PERSISTENCE_MODULE"] = "eventsourcing.popo"
        return env, ""
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://") :]
        if not rest.startswith("/") or rest == "/":
            raise InvalidInputError(
                f"bad SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute/path.db"
            )
        path = unquote(rest[1:].split("?", 1)[0])
        if path in ("", ":memory:"):
            raise InvalidInputError("use memory:// for an in-memory ledger")
        env["PERSISTENCE_MODULE"] = SQLITE_FACTORY
        env["SQLITE_DBNAME"] = path
        env["SQLITE_LOCK_TIMEOUT"] = "30"
        env["APPLICATION_RECORDER_TOPIC"] = "engine.stores:FastSQLiteApplicationRecorder"
        return env, path
    if url.startswith(("postgresql://", "postgres://")):
        u = urlparse(url)
        query = {k: v[-1] for k, v in parse_qs(u.query).items()}
        env["PERSISTENCE_MODULE"] = "eventsourcing.postgres"
        env["POSTGRES_DBNAME"] = unquote(u.path.lstrip("/")) or "postgres"
        env["POSTGRES_HOST"] = u.hostname or "127.0.0.1"
        env["POSTGRES_PORT"] = str(u.port or 5432)
        env["POSTGRES_USER"] = unquote(u.username or "postgres")
        env["POSTGRES_PASSWORD"] = unquote(u.password or "")
        env["POSTGRES_CONNECT_TIMEOUT"] = query.get("connect_timeout", "5")
        env["POSTGRES_POOL_SIZE"] = query.get("pool_size", "2")
        env["POSTGRES_MAX_OVERFLOW"] = query.get("max_overflow", "4")
        if "schema" in query:
            env["POSTGRES_SCHEMA"] = query["schema"]
        env["APPLICATION_RECORDER_TOPIC"] = "engine.pgstore:PostgresApplicationRecorder"
        return env, ""
    raise InvalidInputError(
        f"unsupported store URL {url!r}: use memory://, sqlite:///path.db or postgresql://user@host/db"
    )


def _check_cipher_key(key: Any) -> None:
    """Refuse a malformed cipher key up front, without ever echoing it."""
    usage = "it must be base64 of 16, 24 or 32 random bytes"
    if not isinstance(key, str):
        raise InvalidInputError(f"the cipher key must be a str; {usage}")
    try:
        raw = base64.b64decode(key.encode("utf-8"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise InvalidInputError(f"the cipher key is not valid base64; {usage}") from None
    if len(raw) not in (16, 24, 32):
        raise InvalidInputError(f"the cipher key decodes to {len(raw)} bytes; {usage}")


@contextlib.contextmanager
def postgres_ddl_lock(env: dict[str, str], url: str) -> Iterator[None]:
    """Hold a PostgreSQL advisory lock (one per schema) for the block: tables are created by one
    process at a time. Connecting first also reports a wrong password, an unknown database or a
    server that is down at once, with the server's reason."""
    conn = _probe_postgres(env, url)
    try:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", ("ctxledger:" + env.get("POSTGRES_SCHEMA", "public"),))
        yield
    finally:
        conn.close()  # ending the session releases the lock, also if this process dies


def _probe_postgres(env: dict[str, str], url: str):
    """Connect once before eventsourcing's pool does: a wrong password, an unknown database or a
    server that is down is reported at once, with the server's reason, instead of as the pool's
    "couldn't get a connection" after its timeout. Returns the open (autocommit) connection."""
    try:
        import psycopg
    except ImportError:
        raise StorageError("PostgreSQL needs the postgres extra: pip install 'ctxledger[postgres]'") from None
    try:
        timeout = max(1, int(env["POSTGRES_CONNECT_TIMEOUT"]))
    except ValueError:
        raise InvalidInputError("connect_timeout in the store URL must be a whole number of seconds") from None
    try:
        return psycopg.connect(
            host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], dbname=env["POSTGRES_DBNAME"],
            user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"], connect_timeout=timeout,
            autocommit=True,
        )
    except psycopg.Error as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise StoreUnavailableError(f"cannot connect to {_redact(url)}: the store is unavailable ({reason})") from None


def _check_sqlite_file(path: str) -> None:
    """Refuse a file that is not SQLite, or a SQLite database of another application, before
    eventsourcing creates its table in it."""
    p = Path(path)
    if not p.exists() or p.stat().st_size == 0:
        if p.parent and not p.parent.exists():
            raise StorageError(f"cannot create {path}: directory {p.parent} does not exist")
        return
    try:
        con = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "stored_events" in tables:
                cols = [r[1] for r in con.execute("PRAGMA table_info(stored_events)")]
                if cols[:4] != ["originator_id", "originator_version", "topic", "state"]:
                    raise NotALedgerError(f"{path} is a SQLite database of another application")
                row = con.execute("SELECT topic FROM stored_events ORDER BY rowid LIMIT 1").fetchone()
                if row is not None and row[0] != MARK_TOPIC:
                    raise NotALedgerError(
                        f"{path} holds an eventsourcing store of another application, not a ctxledger"
                    )
            elif tables - {"stored_snapshots", "tracking", "sqlite_sequence"}:
                raise NotALedgerError(
                    f"{path} is a SQLite database of another application "
                    f"(tables: {', '.join(sorted(tables)[:5])}); ctxledger will not write into it"
                )
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise NotALedgerError(f"{path} is not a SQLite database ({e})") from None


class Ledger:
    """A store of sessions. ``Ledger.open(url)``; ``memory://``, ``sqlite:///file.db``,
    ``postgresql://user:pass@host:5432/db``. Without a URL: ``$CTXLEDGER_URL`` or ``./ctxledger.db``."""

    def __init__(self, app: _App, url: str, counter: TokenCounter):
        self._app = app
        self.url = url
        self.counter = counter
        self._forks: dict[UUID, tuple[UUID, int] | None] = {}
        self.snapshot_min_bytes = SNAPSHOT_MIN_BYTES

    # opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        token_counter: TokenCounter | None = None,
        cipher_key: str | None = None,
    ) -> Ledger:
        url = url or os.environ.get("CTXLEDGER_URL") or DEFAULT_URL
        env, sqlite_path = _parse_url(url, cipher_key)
        if sqlite_path:
            _check_sqlite_file(sqlite_path)
        postgres = env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
        # Many processes may open a fresh PostgreSQL store at once: eventsourcing's CREATE TABLE /
        # CREATE TYPE statements race (duplicate pg_type rows, "tuple concurrently updated"), so the
        # tables are made, and the store marked, under an advisory lock.
        with postgres_ddl_lock(env, url) if postgres else contextlib.nullcontext():
            for attempt in range(20):
                try:
                    app = _App(env=env)
                    break
                except LedgerError:
                    raise
                except (OperationalError, sqlite3.OperationalError) as e:
                    # Processes opening a fresh SQLite file at once contend for switching it to WAL
                    # and creating the table; SQLite answers "database is locked" without waiting
                    # (raised by eventsourcing, or by sqlite3 itself from the journal-mode pragma).
                    if not sqlite_path or "locked" not in str(e) or attempt == 19:
                        raise _storage_error(e, f"cannot open {_redact(url)}") from None
                    time.sleep(0.02 * (attempt + 1))
                except Exception as e:
                    raise _storage_error(e, f"cannot open {_redact(url)}") from None
            ledger = cls(app, url, token_counter or default_counter())
            try:
                ledger._check_mark()
            except BaseException:
                ledger.close()  # a refused store keeps no connections open
                raise
        return ledger

    def _check_mark(self) -> None:
        try:
            rows = self._app.recorder.select_events(_MARK_ID, limit=1)
            if rows:
                if rows[0].topic != MARK_TOPIC:
                    raise NotALedgerError(f"{_redact(self.url)} is not a ctxledger store")
                try:
                    self._decode(rows[0])  # a wrong cipher key fails here, cleanly
                except CorruptLogError:
                    if self._app.mapper.cipher is not None:
                        raise CorruptLogError(
                            f"cannot read {_redact(self.url)}: the cipher key does not decrypt this store "
                            "(a wrong key, or the store is not encrypted)"
                        ) from None
                    raise CorruptLogError(
                        f"cannot read {_redact(self.url)}: the store is encrypted (or corrupt); give its key "
                        "with CTXLEDGER_CIPHER_KEY, CTXLEDGER_CIPHER_KEY_FILE or Ledger.open(url, cipher_key=...)"
                    ) from None
                return
            first = self._app.recorder.select_notifications(start=1, limit=1)
            if first and first[0].topic == MARK_TOPIC and first[0].originator_id == _MARK_ID:
                return  # another process marked the store between the two reads
            if first:
                raise NotALedgerError(
                    f"{_redact(self.url)} holds events of another application, not a ctxledger store"
                )
            mark = LedgerMark(originator_id=_MARK_ID, created=now())
            with contextlib.suppress(IntegrityError):  # another process marked it first
                self._app.events.put([mark])
        except LedgerError:
            raise
        except Exception as e:
            raise _storage_error(e, f"cannot use {_redact(self.url)}") from None

    def close(self) -> None:
        self._app.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {_redact(self.url)}>"

    # sessions --------------------------------------------------------------------------------

    def create_session(self, name: str, *, strict: bool = True, by: str = "", reason: str = "") -> Session:
        """A new session with a unique name. ``strict=False`` records rule-breaking rewrites as
        violations instead of refusing them (for importing other tools' histories and baselines)."""
        validate.label(name, "session name")
        if not isinstance(strict, bool):
            raise InvalidInputError(f"strict must be a bool, not {type(strict).__name__}")
        started = SessionStarted(
            originator_version=1, at=now(), name=name, strict=strict,
            by=validate.optional_str(by, "by"), reason=validate.optional_str(reason, "reason"),
        )
        return self._start(started, None, b"")

    def fork(self, session: Session | str, *, at: int | str | None = None, name: str, by: str = "") -> Session:
        """A new session that starts from ``session``'s buffer at position ``at`` (default: its head)
        and shares its history: positions 1..at are the parent's events, the fork continues after."""
        parent = self.session(session) if isinstance(session, str) else session
        validate.label(name, "session name")
        n = parent.resolve_position(at)
        # The fork chains to the parent's event at n; `verify` of the fork walks the shared part too.
        head = chain_hash(self._app.mapper.plaintext(self._stored_row(parent.id, n)))
        started = SessionStarted(
            originator_version=n + 1, at=now(), name=name, strict=parent.strict,
            forked_from=parent.id, fork_position=n, prev=head,
            by=validate.optional_str(by, "by"), reason=f"fork of {parent.name!r} at position {n}",
        )
        return self._start(started, parent.state if n == parent.position else None, head)

    def _start(self, started: SessionStarted, parent_state: BufferState | None, prev: bytes) -> Session:
        from engine.codec import encode_payload

        name = started.name
        session_id = session_uuid(name)
        if self._exists(session_id):
            raise DuplicateSessionError(f"a session named {name!r} already exists")
        payload = encode_payload(started)
        msgspec.structs.force_setattr(started, "originator_id", session_id)
        if started.forked_from is not None:
            self._forks[session_id] = (started.forked_from, started.fork_position)
        state = self._fork_state(started, parent_state) if started.forked_from is not None else None
        state = apply(state, started, lambda p: self._read_event(session_id, p))
        session = Session(self, state, chain_hash(payload))
        session._pending.append(started)
        session._payloads.append(payload)
        try:
            self._save(session)
        except ConcurrencyError:
            self._forks.pop(session_id, None)
            raise DuplicateSessionError(f"a session named {name!r} already exists") from None
        return session

    def session(self, name_or_id: str | UUID) -> Session:
        """Reopen a session by name (or UUID)."""
        if isinstance(name_or_id, UUID):
            session_id = name_or_id
        elif isinstance(name_or_id, str) and name_or_id:
            session_id = session_uuid(name_or_id)
            with contextlib.suppress(ValueError):
                if not self._exists(session_id):
                    session_id = UUID(name_or_id)
        else:
            raise InvalidInputError(f"session name must be a non-empty str, not {name_or_id!r}")
        return self._load_session(session_id, display=str(name_or_id))

    def __contains__(self, name: str) -> bool:
        return isinstance(name, str) and bool(name) and self._exists(session_uuid(name))

    def sessions(self) -> list[SessionInfo]:
        """Every session in the store: name, id, position, strictness, start time."""
        out = []
        topic = TOPICS[SessionStarted]
        start = 1
        while True:
            try:
                page = self._app.recorder.select_notifications(start=start, limit=500, topics=[topic])
            except Exception as e:
                raise _storage_error(e, "cannot list sessions") from None
            for n in page:
                ev = self._decode(n)
                out.append(
                    SessionInfo(
                        name=ev.name,
                        id=ev.originator_id,
                        position=self._head_version(ev.originator_id),
                        strict=ev.strict,
                        started_at=ev.at,
                    )
                )
            if len(page) < 500:
                break
            start = page[-1].id + 1
        return out

    def import_(self, source: Any) -> Session:
        """Import a session exported with ``Session.export`` / ``ctxledger export`` (a path, a text
        stream, bytes or an iterable of lines). Verified whole before anything is written."""
        from engine.transfer import import_lines

        return import_lines(self, source)

    # internals used by Session ---------------------------------------------------------------

    def _exists(self, session_id: UUID) -> bool:
        return self._head_version(session_id) > 0

    def _head_version(self, session_id: UUID) -> int:
        try:
            rows = self._app.recorder.select_events(session_id, desc=True, limit=1)
        except Exception as e:
            raise _storage_error(e, "cannot read the log") from None
        return rows[0].originator_version if rows else 0

    def _decode(self, stored: StoredEvent) -> Any:
        return self._app.mapper.to_domain_event(stored)

    def _projector(self, session_id: UUID):
        def load(position: int) -> Event:
            return self._read_event(session_id, position)

        def project(state, events):
            for ev in events:
                t = type(ev)
                if t is SessionSnapshot:
                    state = with_orders(ev.state)
                else:
                    if t is SessionStarted and ev.forked_from is not None and state is None:
                        state = self._fork_state(ev)
                    state = apply(state, ev, load)
            return state

        return project

    def _load_session(self, session_id: UUID, display: str | None = None) -> Session:
        try:
            state = self._app.repository.get(session_id, projector_func=self._projector(session_id))
            head_rows = self._app.recorder.select_events(session_id, desc=True, limit=1)
        except AggregateNotFoundError:
            raise UnknownSessionError(
                f"no session named {display or str(session_id)!r} in {_redact(self.url)}"
            ) from None
        except LedgerError:
            raise
        except (KeyError, AttributeError, TypeError, IndexError) as e:  # the fold hit an impossible event
            raise CorruptLogError(
                f"session {display or str(session_id)!r} does not replay from its log "
                f"({type(e).__name__}: {e}); `ctxledger verify` names the first bad position"
            ) from None
        except Exception as e:
            raise _storage_error(e, "cannot load the session") from None
        if state is None:
            raise UnknownSessionError(f"no session named {display or str(session_id)!r}")
        head = chain_hash(self._app.mapper.plaintext(head_rows[0]))
        return Session(self, state, head)

    def _fork_state(self, started: SessionStarted, parent_state: BufferState | None = None) -> BufferState:
        """The parent's buffer at the fork position: what a fork's own SessionStarted applies to."""
        if parent_state is not None and parent_state.version == started.fork_position:
            return parent_state
        return self._state_at(started.forked_from, started.fork_position)

    def _state_at(self, session_id: UUID, n: int) -> BufferState:
        parent = self._parent(session_id)
        if parent is not None and n <= parent[1]:
            return self._state_at(parent[0], n)
        try:
            return self._app.repository.get(session_id, version=n, projector_func=self._projector(session_id))
        except LedgerError:
            raise
        except Exception as e:
            raise _storage_error(e, f"cannot rebuild the buffer at position {n}") from None

    def _rebuild(self, session_id: UUID, n: int) -> BufferState:
        """The buffer at position n folded from the first event, ignoring every snapshot."""
        state = None

        def load(position: int) -> Event:
            return self._read_event(session_id, position)

        decode_rows = self._app.mapper.decode_rows
        for owner, rows in self._pages(session_id, 1, n):
            for ev in decode_rows(owner, rows):
                state = apply(state, ev, load)
        return state

    @staticmethod
    def _copy_state(state: BufferState) -> BufferState:
        return msgspec.structs.replace(state, live=dict(state.live), marks=dict(state.marks))

    def _save(self, session: Session) -> None:
        try:
            self._app.save_session(session)
        except IntegrityError:
            raise ConcurrencyError(
                f"session {session.name!r} was appended to by another writer; "
                "nothing of this command was written. Reload the session and retry."
            ) from None
        except LedgerError:
            raise
        except Exception as e:
            raise _storage_error(e, "cannot write to the log; nothing was written") from None

    def _parent(self, session_id: UUID) -> tuple[UUID, int] | None:
        """For a fork: (parent session id, fork position). Positions up to the fork position are the
        parent's events; the fork's own stream continues the numbering after it."""
        try:
            return self._forks[session_id]
        except KeyError:
            pass
        rows = self._app.recorder.select_events(session_id, limit=1)
        parent = None
        if rows and rows[0].topic == TOPICS[SessionStarted]:
            ev = self._decode(rows[0])
            if ev.forked_from is not None:
                parent = (ev.forked_from, ev.fork_position)
        if rows:
            self._forks[session_id] = parent
        return parent

    def _stored_row(self, session_id: UUID, position: int) -> StoredEvent:
        """The stored record at one position (a primary-key read; a fork's early positions are its
        parent's)."""
        parent = self._parent(session_id)
        if parent is not None and position <= parent[1]:
            return self._stored_row(parent[0], position)
        try:
            rows = self._app.recorder.select_events(session_id, gt=position - 1, lte=position)
        except Exception as e:
            raise _storage_error(e, f"cannot read position {position}") from None
        if not rows:
            raise CorruptLogError(f"position {position} is missing from the log", position=position)
        return rows[0]

    def _read_event(self, session_id: UUID, position: int) -> Event:
        return self._decode(self._stored_row(session_id, position))

    def _pages(
        self, session_id: UUID, start: int, stop: int, page: int = 1000
    ) -> Iterator[tuple[UUID, list[tuple[int, str, bytes]]]]:
        """Positions start..stop as pages of (position, topic, stored bytes) rows, each with the id
        of the session that stored them (a fork's early positions are its parent's): the bulk-read
        path of rebuild, export and audit."""
        parent = self._parent(session_id)
        if parent is not None:
            if start <= parent[1]:
                yield from self._pages(parent[0], start, min(stop, parent[1]), page)
            start = max(start, parent[1] + 1)
        gt = start - 1
        while gt < stop:
            rows = self._select_rows(session_id, gt, stop, page)
            if not rows:
                return
            yield session_id, rows
            gt = rows[-1][0]

    def _select_rows(
        self, session_id: UUID, gt: int, lte: int, limit: int, desc: bool = False
    ) -> list[tuple[int, str, bytes]]:
        """(position, topic, stored bytes) rows of one session's stream: the recorder's plain-row
        read where it has one (SQLite), its ``select_events`` otherwise."""
        recorder = self._app.recorder
        try:
            fast = getattr(recorder, "select_rows", None)
            if fast is not None:
                return fast(session_id, gt=gt, lte=lte, limit=limit, desc=desc)
            return [
                (r.originator_version, r.topic, r.state)
                for r in recorder.select_events(session_id, gt=gt, lte=lte, desc=desc, limit=limit)
            ]
        except Exception as e:
            raise _storage_error(e, "cannot read the log") from None

    def _iter_events(self, session_id: UUID, start: int, stop: int, page: int = 1000) -> Iterator[Event]:
        decode_rows = self._app.mapper.decode_rows
        for owner, rows in self._pages(session_id, start, stop, page):
            try:
                events = decode_rows(owner, rows)
            except CorruptLogError:
                # a reader of the log gets every event before the damaged one, then the error
                for position, topic, data in rows:
                    yield self._decode(StoredEvent(owner, position, topic, data))
                raise  # pragma: no cover - the loop above raised
            yield from events

    def _iter_events_desc(
        self, session_id: UUID, stop: int, page: int = 1000, needle: bytes | None = None
    ) -> Iterator[Event]:
        """Events from ``stop`` back to the first. ``needle``: skip, without decoding them, the rows
        whose plaintext bytes do not contain it (when the store is neither encrypted nor compressed)."""
        parent = self._parent(session_id)
        floor = parent[1] if parent is not None else 0
        mapper = self._app.mapper
        if mapper.cipher is not None or mapper.compressor is not None:
            needle = None
        lte = stop
        while lte > floor:
            rows = self._select_rows(session_id, floor, lte, page, desc=True)
            if not rows:
                break
            for position, topic, data in rows:
                if needle is None or needle in data:
                    yield self._decode(StoredEvent(session_id, position, topic, data))
            lte = rows[-1][0] - 1
        if parent is not None:
            yield from self._iter_events_desc(parent[0], min(stop, parent[1]), page, needle)

    def _first_of_type(self, session_id: UUID, cls: type, lo: int, hi: int, page: int = 64) -> Event | None:
        parent = self._parent(session_id)
        if parent is not None:
            if lo <= parent[1]:
                found = self._first_of_type(parent[0], cls, lo, min(hi, parent[1]), page)
                if found is not None:
                    return found
            lo = max(lo, parent[1] + 1)
        topic = TOPICS[cls]
        gt = lo - 1
        while gt < hi:
            rows = self._app.recorder.select_events(session_id, gt=gt, lte=hi, limit=page)
            if not rows:
                return None
            for row in rows:
                if row.topic == topic:
                    return self._decode(row)
            gt = rows[-1].originator_version
        return None

    def _raw_events(self, session_id: UUID, stop: int | None = None) -> Iterator[StoredEvent]:
        """The stored records 1..stop (every stored one when stop is None), through a fork's parent."""
        for owner, rows in self._pages(session_id, 1, stop if stop is not None else LAST_POSITION):
            for position, topic, data in rows:
                yield StoredEvent(owner, position, topic, data)

    def verify(self, session: str | UUID) -> VerifyResult:
        """Walk a session's hash chain as stored, without loading its buffer (so a log too damaged
        to replay can still be verified and the first bad position named)."""
        if isinstance(session, UUID):
            session_id = session
        elif isinstance(session, str) and session:
            session_id = session_uuid(session)
            if not self._head_version(session_id):
                with contextlib.suppress(ValueError):
                    session_id = UUID(session)
        else:
            raise InvalidInputError(f"session name must be a non-empty str, not {session!r}")
        if not self._head_version(session_id):
            raise UnknownSessionError(f"no session named {str(session)!r} in {_redact(self.url)}")
        return self._verify(session_id, None)

    def _verify(self, session_id: UUID, stop: int | None, pending: Sequence[Event] = ()) -> VerifyResult:
        """Walk the chain (``engine.chain.ChainWalk``, the fast path) to ``stop`` and on through the
        ``pending`` events of an open batch; when it stops early, walk the stored log again event by
        event to say where and why (``_explain``)."""
        from engine.chain import ChainWalk

        walk = ChainWalk(self, session_id, stop, pending=pending).run()
        if walk.ok and walk.last > 0:
            return VerifyResult(ok=True, position=walk.last, head=walk.head.hex())
        if pending and stop is not None and walk.last >= stop:  # the stored log is sound
            return VerifyResult(
                ok=False, position=walk.last, first_bad_position=walk.last + 1,
                reason=f"the unsaved event at position {walk.last + 1} does not chain to the event before it",
            )
        return self._explain(session_id, stop)

    def _explain(self, session_id: UUID, stop: int | None) -> VerifyResult:
        """Walk the chain: contiguous positions, decodable payloads whose embedded position matches
        their row, each ``prev`` equal to the hash of the event before it.

        ``first_bad_position`` is the earliest position the evidence implicates: a broken link
        between p-1 and p is blamed on p-1 when the event after p still chains to p (p-1 was
        changed), and on p when it does not (p was changed, or inserted: its successor chains to
        p-1)."""
        prev = b""  # the chain hash of the last good event (p-1)
        before = b""  # the chain hash of the good event before it (p-2)
        expected = 1
        checked = 0

        def fail(bad: int, reason: str) -> VerifyResult:
            return VerifyResult(ok=False, position=checked, first_bad_position=bad, reason=reason)

        def read(row: StoredEvent) -> tuple[bytes, Any]:
            payload = self._app.mapper.plaintext(row)
            return payload, decode_payload(row.topic, payload, None, row.originator_version)

        try:
            rows = self._raw_events(session_id, stop)
            for row in rows:
                position = row.originator_version
                if position != expected:
                    bad = expected if position > expected else position
                    return fail(bad, f"position {expected} is missing (next stored position is {position})")
                try:
                    payload, ev = read(row)
                except Exception as e:
                    return fail(position, f"event at position {position} cannot be read: {_message(e)}")
                if not isinstance(ev, Event):
                    return fail(position, f"position {position} holds a {row.topic}, not a session event")
                if ev.originator_version != position:
                    if position > 1 and ev.originator_version == position - 1 and ev.prev == before:
                        return fail(
                            position - 1,
                            f"an event was inserted at position {position - 1}: the events after it were "
                            f"moved up by one (the event stored at {position} was written for {position - 1})",
                        )
                    return fail(
                        position,
                        f"the event stored at position {position} was written for position "
                        f"{ev.originator_version} (events were moved or reordered)",
                    )
                is_start = isinstance(ev, SessionStarted)
                fork_start = is_start and ev.forked_from is not None and ev.fork_position == position - 1
                if (position == 1 and not is_start) or (is_start and position != 1 and not fork_start):
                    return fail(
                        position,
                        f"position {position} holds a {type(ev).__name__}; "
                        "a session's log starts with exactly one SessionStarted",
                    )
                if ev.prev != prev:
                    if position == 1:
                        return fail(1, "the first event does not start a chain: position 1 was changed")
                    successor = None
                    with contextlib.suppress(Exception):
                        nxt = next(rows, None)
                        if nxt is not None and nxt.originator_version == position + 1:
                            successor = read(nxt)[1]
                    if successor is not None and successor.prev == chain_hash(payload):
                        bad, why = position - 1, f"position {position - 1} was changed"
                    elif successor is not None and successor.prev == prev:
                        bad, why = position, (
                            f"position {position} was inserted or replaced (the event after it chains to "
                            f"position {position - 1})"
                        )
                    elif successor is not None:
                        bad, why = position, f"position {position} was changed (no event chains to it)"
                    else:
                        bad, why = position - 1, f"position {position - 1} was changed, or {position} replaced"
                    return fail(
                        bad, f"the event at position {position} does not chain to the event before it: {why}"
                    )
                before, prev = prev, chain_hash(payload)
                checked = position
                expected += 1
        except LedgerError:
            raise
        except Exception as e:
            raise _storage_error(e, "cannot read the log") from None
        if stop is not None and checked < stop:
            return fail(checked + 1, f"the log ends at position {checked}; expected {stop} events")
        return VerifyResult(ok=True, position=checked, head=prev.hex())


def _redact(url: str) -> str:
    """A URL fit for messages: the password never appears."""
    try:
        u = urlparse(url)
    except ValueError:
        return "<unparseable url>"
    if u.password:
        netloc = f"{u.username}:***@{u.hostname}" + (f":{u.port}" if u.port else "")
        return u._replace(netloc=netloc).geturl()
    return url


def _message(e: BaseException) -> str:
    return getattr(e, "message", None) or str(e) or type(e).__name__


def _storage_error(e: BaseException, what: str) -> StorageError:
    text = " ".join(_message(e).split())  # one line: drivers add DETAIL/HINT lines
    if isinstance(e, (OperationalError, ConnectionError, TimeoutError)) or "connect" in text.lower():
        return StoreUnavailableError(f"{what}: the store is unavailable ({type(e).__name__}: {text})")
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in text:
        return NotALedgerError(f"{what}: the file is not a SQLite database")
    return StorageError(f"{what}: {type(e).__name__}: {text}")
