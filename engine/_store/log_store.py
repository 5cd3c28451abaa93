"""Store access: the one module that talks to eventsourcing's persistence.

``LogStore.open(url)`` maps a store URL onto eventsourcing's persistence modules (SQLite, PostgreSQL,
in-memory), checks the store is ours, and then reads a session's stream as rows, pages or decoded
events (through a fork's parent where the positions are the parent's), folds buffer states at a
position (snapshots included), and writes a session's pending events. Storage failures become
typed ``StorageError``s here, once. Sessions, the ledger, the chain walk and export/import read the
log only through this module's public functions and methods."""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, quote, unquote, urlparse
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

from engine._store.codec import (
    MARK_TOPIC,
    TOPICS,
    EventMapper,
    LedgerMark,
    SessionSnapshot,
    chain_hash,
)
from engine.errors import (
    ConcurrencyError,
    CorruptLogError,
    InvalidInputError,
    LedgerError,
    NotALedgerError,
    StorageError,
    StoreUnavailableError,
    UnknownSessionError,
)
from engine.events import Event, SessionStarted, now
from engine.extras import MissingExtraError
from engine._store import sessions_table
from engine._store.sqlite import SQLITE_FACTORY, FastSQLiteApplicationRecorder
from projections.buffer import BufferState, apply, with_orders

__all__ = [
    "LogStore",
    "Writable",
    "session_uuid",
    "redact",
    "storage_error",
    "error_message",
    "parse_url",
    "store_url",
    "postgres_ddl_lock",
    "LAST_POSITION",
    "MARK_ID",
]

_NS = uuid5(NAMESPACE_URL, "https://ctxledger.dev/")
MARK_ID = uuid5(_NS, "ledger")
SNAPSHOT_MIN_BYTES = 32 * 1024
SNAPSHOT_LIVE_FACTOR = 2
LAST_POSITION = 2**62  # "to the end of the log" for range reads


def session_uuid(name: str) -> UUID:
    """Session ids are derived from the unique name: the store's primary key enforces uniqueness."""
    return uuid5(_NS, "session:" + name)


class Writable(Protocol):
    """What the store needs of a session to save it (``engine.session.Session`` is one)."""

    id: UUID
    version: int
    state: BufferState
    bytes_since_snapshot: int

    def take_pending(self) -> tuple[list[Event], list[bytes]]: ...


class StoreApp(Application):
    """eventsourcing Application configured only by the URL (never by stray environment variables)."""

    name = "ctxledger"
    snapshot_class = SessionSnapshot
    snapshot_min_bytes = SNAPSHOT_MIN_BYTES

    def construct_env(self, name: str, env: Any = None) -> Environment:
        return Environment(name, dict(env or {}))

    def construct_mapper(self):
        return self.factory.mapper(transcoder=self.construct_transcoder(), mapper_class=EventMapper)

    def construct_transcoder(self):
        from eventsourcing.persistence import JSONTranscoder

        return JSONTranscoder()  # unused by EventMapper; eventsourcing wants one

    def save_session(self, session: Writable) -> None:
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
            recorder.append(params, snapshot, sessions_table.rows_for(session.id, events, sealed=self.sealed))
            if snapshot is not None:
                session.bytes_since_snapshot = 0
            return
        prepared = self.mapper.prepared
        for ev, payload in zip(events, payloads):
            prepared[id(ev)] = payload
        try:
            self.events.put(events, sessions=sessions_table.rows_for(session.id, events, sealed=self.sealed))
        finally:
            for ev in events:
                prepared.pop(id(ev), None)
        if self._snapshot_due(session):
            with contextlib.suppress(PersistenceError):
                self.snapshots.put([SessionSnapshot.take(session)])
                session.bytes_since_snapshot = 0

    @property
    def sealed(self) -> bool:
        """Whether the store is encrypted (its projections then hold no plaintext)."""
        return self.mapper.cipher is not None

    def _snapshot_due(self, session: Writable) -> bool:
        # A snapshot costs about the live buffer's size (encoded and compressed) when it is written;
        # time travel loads the nearest one and replays the events after it. Taking one when the
        # bytes appended since the last exceed twice the live buffer's text bounds both: writing
        # snapshots costs at most half a live buffer's worth of work per byte appended, and time
        # travel replays at most two live buffers' worth of events (measured: median ~1-2 ms at
        # 10k..1M events, the target is 5 ms; with 1x the write path spent ~10% on snapshots).
        if self.snapshots is None:
            return False
        threshold = max(self.snapshot_min_bytes, SNAPSHOT_LIVE_FACTOR * session.state.text_bytes)
        return session.bytes_since_snapshot >= threshold


def store_url(url: str) -> str:
    """The store URL for what a user typed: a plain file path (``prof.db``, ``/data/agents.db``)
    means a SQLite file, as in sqlite-utils; URLs (``memory://``, ``sqlite:///``, ``postgresql://``,
    or any other ``scheme://``, refused later) are kept as they are."""
    if not isinstance(url, str) or not url or "://" in url or url in ("memory:", ":memory:"):
        return url
    if url.startswith(("sqlite:", "postgresql:", "postgres:")):
        return url  # a mistyped URL gets parse_url's message, not a file named "sqlite:x.db"
    return "sqlite:///" + quote(url, safe="/")


def parse_url(url: str, cipher_key: str | None) -> tuple[dict[str, str], str]:
    """Map a store URL (or a plain SQLite file path) onto eventsourcing's persistence settings.
    Returns (env, sqlite path or '')."""
    if not isinstance(url, str) or not url:
        raise InvalidInputError(f"store URL must be a non-empty str, not {url!r}")
    if url == ":memory:":
        raise InvalidInputError("use memory:// for an in-memory ledger")
    url = store_url(url)
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
        options = {k: v[-1] for k, v in parse_qs(rest.split("?", 1)[1]).items()} if "?" in rest else {}
        synchronous = options.get("synchronous", "full").lower()
        if synchronous not in ("full", "normal"):
            raise InvalidInputError(f"bad SQLite URL {url!r}: synchronous is full (the default) or normal")
        env["SQLITE_SYNCHRONOUS"] = synchronous.upper()
        env["APPLICATION_RECORDER_TOPIC"] = "engine._store.sqlite:FastSQLiteApplicationRecorder"
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
        env["APPLICATION_RECORDER_TOPIC"] = "engine._store.postgres:PostgresApplicationRecorder"
        return env, ""
    raise InvalidInputError(
        f"unsupported store URL {url!r}: use memory://, a file path or sqlite:///path.db, or postgresql://user@host/db"
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
    except ImportError as e:
        raise MissingExtraError("PostgreSQL", "postgres", getattr(e, "name", None) or "psycopg") from None
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
        raise StoreUnavailableError(f"cannot connect to {redact(url)}: the store is unavailable ({reason})") from None


def _check_sqlite_file(path: str) -> None:
    """Refuse a file that is not SQLite, or a SQLite database of another application, before
    eventsourcing creates its table in it."""
    p = Path(path)
    if not p.exists() or p.stat().st_size == 0:
        if p.parent and not p.parent.exists():
            raise StorageError(f"cannot create {path}: directory {p.parent} does not exist")
        return
    try:
        try:
            con = _read_only(p)
        except sqlite3.OperationalError as e:
            # A writer killed mid-transaction (a hook stopped while the store was being created)
            # leaves a hot journal, which only a writable connection rolls back, as the next
            # writer would anyway; the read-only check would call the file not SQLite.
            if "readonly" not in str(e) or not Path(f"{p}-journal").exists():
                raise
            writable = sqlite3.connect(f"file:{p.resolve()}?mode=rw", uri=True)
            try:
                writable.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()  # the rollback
            finally:
                writable.close()
            con = _read_only(p)
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


def _read_only(p: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
    try:
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()  # reads page 1: a hot journal fails here
    except BaseException:
        con.close()
        raise
    return con


class LogStore:
    """A ctxledger store opened by URL: the eventsourcing application behind it, and every read
    and write of session streams. ``app`` is the eventsourcing ``Application`` (its recorder,
    mapper and snapshots) for code that extends the store (the fleet view, search indexes)."""

    def __init__(self, app: StoreApp, url: str):
        self.app = app
        self.url = url
        self._forks: dict[UUID, tuple[UUID, int] | None] = {}

    @classmethod
    def open(cls, url: str, *, cipher_key: str | None = None) -> LogStore:
        url = store_url(url)
        env, sqlite_path = parse_url(url, cipher_key)
        if sqlite_path:
            _check_sqlite_file(sqlite_path)
        postgres = env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"
        # Many processes may open a fresh PostgreSQL store at once: eventsourcing's CREATE TABLE /
        # CREATE TYPE statements race (duplicate pg_type rows, "tuple concurrently updated"), so the
        # tables are made, and the store marked, under an advisory lock.
        with postgres_ddl_lock(env, url) if postgres else contextlib.nullcontext():
            for attempt in range(20):
                try:
                    app = StoreApp(env=env)
                    break
                except LedgerError:
                    raise
                except (OperationalError, sqlite3.OperationalError) as e:
                    # Processes opening a fresh SQLite file at once contend for switching it to WAL
                    # and creating the table; SQLite answers "database is locked" without waiting
                    # (raised by eventsourcing, or by sqlite3 itself from the journal-mode pragma).
                    if not sqlite_path or "locked" not in str(e) or attempt == 19:
                        raise storage_error(e, f"cannot open {redact(url)}") from None
                    time.sleep(0.02 * (attempt + 1))
                except Exception as e:
                    raise storage_error(e, f"cannot open {redact(url)}") from None
            store = cls(app, url)
            try:
                store._check_mark()
                store._ensure_sessions_table()
            except BaseException:
                store.close()  # a refused store keeps no connections open
                raise
        return store

    @property
    def snapshot_min_bytes(self) -> int:
        return self.app.snapshot_min_bytes

    @snapshot_min_bytes.setter
    def snapshot_min_bytes(self, value: int) -> None:
        self.app.snapshot_min_bytes = value

    def close(self) -> None:
        self.app.close()

    def _check_mark(self) -> None:
        try:
            rows = self.app.recorder.select_events(MARK_ID, limit=1)
            if rows:
                if rows[0].topic != MARK_TOPIC:
                    raise NotALedgerError(f"{redact(self.url)} is not a ctxledger store")
                try:
                    self.decode(rows[0])  # a wrong cipher key fails here, cleanly
                except CorruptLogError:
                    if self.app.mapper.cipher is not None:
                        raise CorruptLogError(
                            f"cannot read {redact(self.url)}: the cipher key does not decrypt this store "
                            "(a wrong key, or the store is not encrypted)"
                        ) from None
                    raise CorruptLogError(
                        f"cannot read {redact(self.url)}: the store is encrypted (or corrupt); give its key "
                        "with CTXLEDGER_CIPHER_KEY, CTXLEDGER_CIPHER_KEY_FILE or Ledger.open(url, cipher_key=...)"
                    ) from None
                return
            first = self.app.recorder.select_notifications(start=1, limit=1)
            if first and first[0].topic == MARK_TOPIC and first[0].originator_id == MARK_ID:
                return  # another process marked the store between the two reads
            if first:
                raise NotALedgerError(
                    f"{redact(self.url)} holds events of another application, not a ctxledger store"
                )
            mark = LedgerMark(originator_id=MARK_ID, created=now())
            with contextlib.suppress(IntegrityError):  # another process marked it first
                self.app.events.put([mark])
        except LedgerError:
            raise
        except Exception as e:
            raise storage_error(e, f"cannot use {redact(self.url)}") from None

    # -- the sessions projection (engine._store.sessions_table) ------------------------------------------

    @property
    def _backend(self) -> str:
        recorder = self.app.recorder
        if isinstance(recorder, FastSQLiteApplicationRecorder):
            return "sqlite"
        if type(recorder).__module__ == "engine._store.postgres":
            return "postgres"
        return ""  # memory:// keeps no projection: its sessions are listed from the log

    def _decode_at(self, session_id: UUID, position: int) -> Any:
        """The event at a position of a session's own stream, or None when missing or unreadable."""
        try:
            rows = self.app.recorder.select_events(session_id, gt=position - 1, lte=position)
            return self.decode(rows[0]) if rows else None
        except LedgerError:
            return None

    def _ensure_sessions_table(self) -> None:
        """Build the sessions projection from the log if the store has none yet (once per store)."""
        backend = self._backend
        if not backend:
            return
        try:
            self._build_sessions_table(backend)
        except LedgerError:
            raise
        except Exception as e:
            raise storage_error(e, f"cannot build the sessions table of {redact(self.url)}") from None

    def _build_sessions_table(self, backend: str) -> None:
        recorder = self.app.recorder
        if backend == "sqlite":
            pool = recorder.datastore.pool
            conn = pool.get_connection(is_writer=True)
            try:
                sessions_table.sqlite_ensure(conn._sqlite_conn, recorder.events_table_name, MARK_ID,
                                             self._decode_at, sealed=self.app.sealed)
            finally:
                pool.put_connection(conn)
            return
        with recorder.datastore.get_connection() as conn:
            sessions_table.postgres_ensure(conn, recorder.datastore.schema, recorder.events_table_name, MARK_ID,
                                           self._decode_at, sealed=self.app.sealed)

    def session_rows(self) -> list[sessions_table.Stored] | None:
        """The sessions projection in creation order: one small read, whatever the log's size. None
        for a store that keeps none (``memory://``: ``started_events`` lists its sessions)."""
        backend = self._backend
        if not backend:
            return None
        recorder = self.app.recorder
        try:
            if backend == "sqlite":
                return sessions_table.sqlite_read(lambda sql: recorder._select(sql, ()))
            with recorder.datastore.get_connection() as conn:
                return sessions_table.postgres_read(conn, recorder.datastore.schema)
        except Exception as e:
            raise storage_error(e, "cannot list sessions") from None

    def session_event(self, session_id: UUID, position: int) -> Any:
        """The event at a position of a session's own stream, None when it is not there; a row that
        does not decode raises ``CorruptLogError``."""
        try:
            rows = self.app.recorder.select_events(session_id, gt=position - 1, lte=position)
        except Exception as e:
            raise storage_error(e, "cannot read the log") from None
        return self.decode(rows[0]) if rows else None

    def exists(self, session_id: UUID) -> bool:
        return self.head_version(session_id) > 0

    def head_version(self, session_id: UUID) -> int:
        try:
            rows = self.app.recorder.select_events(session_id, desc=True, limit=1)
        except Exception as e:
            raise storage_error(e, "cannot read the log") from None
        return rows[0].originator_version if rows else 0

    def decode(self, stored: StoredEvent) -> Any:
        return self.app.mapper.to_domain_event(stored)

    def _projector(self, session_id: UUID):
        def load(position: int) -> Event:
            return self.read_event(session_id, position)

        def project(state, events):
            for ev in events:
                t = type(ev)
                if t is SessionSnapshot:
                    state = with_orders(ev.state)
                else:
                    if t is SessionStarted and ev.forked_from is not None and state is None:
                        state = self.fork_state(ev)
                    state = apply(state, ev, load)
            return state

        return project

    def load(self, session_id: UUID, display: str | None = None) -> tuple[BufferState, bytes]:
        """A session's buffer at its head (from the newest snapshot on) and the head's chain hash."""
        try:
            state = self.app.repository.get(session_id, projector_func=self._projector(session_id))
            head_rows = self.app.recorder.select_events(session_id, desc=True, limit=1)
        except AggregateNotFoundError:
            raise UnknownSessionError(
                f"no session named {display or str(session_id)!r} in {redact(self.url)}"
            ) from None
        except LedgerError:
            raise
        except (KeyError, AttributeError, TypeError, IndexError):  # the fold hit an impossible event
            raise CorruptLogError(
                f"session {display or str(session_id)!r} does not replay from its log (an event does not "
                "apply to the buffer before it); `ctxledger verify` names the first bad position"
            ) from None
        except Exception as e:
            raise storage_error(e, "cannot load the session") from None
        if state is None:
            raise UnknownSessionError(f"no session named {display or str(session_id)!r}")
        return state, chain_hash(self.app.mapper.plaintext(head_rows[0]))

    def fork_state(self, started: SessionStarted, parent_state: BufferState | None = None) -> BufferState:
        """The parent's buffer at the fork position: what a fork's own SessionStarted applies to."""
        if parent_state is not None and parent_state.version == started.fork_position:
            return parent_state
        return self.state_at(started.forked_from, started.fork_position)

    def state_at(self, session_id: UUID, n: int) -> BufferState:
        parent = self.parent(session_id)
        if parent is not None and n <= parent[1]:
            return self.state_at(parent[0], n)
        try:
            return self.app.repository.get(session_id, version=n, projector_func=self._projector(session_id))
        except LedgerError:
            raise
        except Exception as e:
            raise storage_error(e, f"cannot rebuild the buffer at position {n}") from None

    def rebuild(self, session_id: UUID, n: int) -> BufferState:
        """The buffer at position n folded from the first event, ignoring every snapshot."""
        state = None

        def load(position: int) -> Event:
            return self.read_event(session_id, position)

        decode_rows = self.app.mapper.decode_rows
        for owner, rows in self.pages(session_id, 1, n):
            for ev in decode_rows(owner, rows):
                state = apply(state, ev, load)
        return state

    @staticmethod
    def copy_state(state: BufferState) -> BufferState:
        return msgspec.structs.replace(state, live=dict(state.live), marks=dict(state.marks))

    def save(self, session: Writable) -> None:
        """Write the session's pending events in one transaction (and a due snapshot with them)."""
        try:
            self.app.save_session(session)
        except IntegrityError:
            raise ConcurrencyError(
                f"session {session.name!r} was appended to by another writer; "
                "nothing of this command was written. Reload the session and retry."
            ) from None
        except LedgerError:
            raise
        except Exception as e:
            raise storage_error(e, "cannot write to the log; nothing was written") from None

    def parent(self, session_id: UUID) -> tuple[UUID, int] | None:
        """For a fork: (parent session id, fork position). Positions up to the fork position are the
        parent's events; the fork's own stream continues the numbering after it."""
        try:
            return self._forks[session_id]
        except KeyError:
            pass
        rows = self.app.recorder.select_events(session_id, limit=1)
        parent = None
        if rows and rows[0].topic == TOPICS[SessionStarted]:
            ev = self.decode(rows[0])
            if ev.forked_from is not None:
                parent = (ev.forked_from, ev.fork_position)
        if rows:
            self._forks[session_id] = parent
        return parent

    def stored_row(self, session_id: UUID, position: int) -> StoredEvent:
        """The stored record at one position (a primary-key read; a fork's early positions are its
        parent's)."""
        parent = self.parent(session_id)
        if parent is not None and position <= parent[1]:
            return self.stored_row(parent[0], position)
        try:
            rows = self.app.recorder.select_events(session_id, gt=position - 1, lte=position)
        except Exception as e:
            raise storage_error(e, f"cannot read position {position}") from None
        if not rows:
            raise CorruptLogError(f"position {position} is missing from the log", position=position)
        return rows[0]

    def read_event(self, session_id: UUID, position: int) -> Event:
        return self.decode(self.stored_row(session_id, position))

    def pages(
        self, session_id: UUID, start: int, stop: int, page: int = 1000
    ) -> Iterator[tuple[UUID, list[tuple[int, str, bytes]]]]:
        """Positions start..stop as pages of (position, topic, stored bytes) rows, each with the id
        of the session that stored them (a fork's early positions are its parent's): the bulk-read
        path of rebuild, export and audit."""
        parent = self.parent(session_id)
        if parent is not None:
            if start <= parent[1]:
                yield from self.pages(parent[0], start, min(stop, parent[1]), page)
            start = max(start, parent[1] + 1)
        gt = start - 1
        while gt < stop:
            rows = self.select_rows(session_id, gt, stop, page)
            if not rows:
                return
            yield session_id, rows
            gt = rows[-1][0]

    def select_rows(
        self, session_id: UUID, gt: int, lte: int, limit: int, desc: bool = False
    ) -> list[tuple[int, str, bytes]]:
        """(position, topic, stored bytes) rows of one session's stream: the recorder's plain-row
        read where it has one (SQLite), its ``select_events`` otherwise."""
        recorder = self.app.recorder
        try:
            fast = getattr(recorder, "select_rows", None)
            if fast is not None:
                return fast(session_id, gt=gt, lte=lte, limit=limit, desc=desc)
            return [
                (r.originator_version, r.topic, r.state)
                for r in recorder.select_events(session_id, gt=gt, lte=lte, desc=desc, limit=limit)
            ]
        except Exception as e:
            raise storage_error(e, "cannot read the log") from None

    def iter_events(self, session_id: UUID, start: int, stop: int, page: int = 1000) -> Iterator[Event]:
        decode_rows = self.app.mapper.decode_rows
        for owner, rows in self.pages(session_id, start, stop, page):
            try:
                events = decode_rows(owner, rows)
            except CorruptLogError:
                # a reader of the log gets every event before the damaged one, then the error
                for position, topic, data in rows:
                    yield self.decode(StoredEvent(owner, position, topic, data))
                raise  # pragma: no cover - the loop above raised
            yield from events

    def events_of_types(self, session_id: UUID, types: Sequence[type], stop: int) -> list[Event]:
        """The events of these types among positions 1..stop, in order, decoded: one query on
        SQLite (by topic), elsewhere a pass over the rows that decodes only these."""
        topics = tuple(TOPICS[t] for t in types)
        fast = getattr(self.app.recorder, "select_topic_rows", None)
        if fast is not None and self.parent(session_id) is None:
            try:
                rows = fast(session_id, topics, stop)
            except Exception as e:
                raise storage_error(e, "cannot read the log") from None
            return self.app.mapper.decode_rows(session_id, rows)
        wanted = set(topics)
        out: list[Event] = []
        for owner, rows in self.pages(session_id, 1, stop):
            picked = [r for r in rows if r[1] in wanted]
            if picked:
                out.extend(self.app.mapper.decode_rows(owner, picked))
        return out

    def iter_events_desc(
        self, session_id: UUID, stop: int, page: int = 1000, needle: bytes | None = None
    ) -> Iterator[Event]:
        """Events from ``stop`` back to the first. ``needle``: skip, without decoding them, the rows
        whose plaintext bytes do not contain it (when the store is neither encrypted nor compressed)."""
        parent = self.parent(session_id)
        floor = parent[1] if parent is not None else 0
        mapper = self.app.mapper
        if mapper.cipher is not None or mapper.compressor is not None:
            needle = None
        lte = stop
        while lte > floor:
            rows = self.select_rows(session_id, floor, lte, page, desc=True)
            if not rows:
                break
            for position, topic, data in rows:
                if needle is None or needle in data:
                    yield self.decode(StoredEvent(session_id, position, topic, data))
            lte = rows[-1][0] - 1
        if parent is not None:
            yield from self.iter_events_desc(parent[0], min(stop, parent[1]), page, needle)

    def first_of_type(self, session_id: UUID, cls: type, lo: int, hi: int, page: int = 64) -> Event | None:
        parent = self.parent(session_id)
        if parent is not None:
            if lo <= parent[1]:
                found = self.first_of_type(parent[0], cls, lo, min(hi, parent[1]), page)
                if found is not None:
                    return found
            lo = max(lo, parent[1] + 1)
        topic = TOPICS[cls]
        gt = lo - 1
        while gt < hi:
            rows = self.app.recorder.select_events(session_id, gt=gt, lte=hi, limit=page)
            if not rows:
                return None
            for row in rows:
                if row.topic == topic:
                    return self.decode(row)
            gt = rows[-1].originator_version
        return None

    def raw_events(self, session_id: UUID, stop: int | None = None) -> Iterator[StoredEvent]:
        """The stored records 1..stop (every stored one when stop is None), through a fork's parent."""
        for owner, rows in self.pages(session_id, 1, stop if stop is not None else LAST_POSITION):
            for position, topic, data in rows:
                yield StoredEvent(owner, position, topic, data)

    def put_events(self, events: Sequence[Event]) -> None:
        """Store already-chained events as they are (an import): all or nothing."""
        try:
            rows = sessions_table.rows_by_session(events, sealed=self.app.sealed)
            self.app.events.put(list(events), sessions=rows)
        except IntegrityError:
            raise ConcurrencyError("the session was written by another writer meanwhile; nothing was imported") from None
        except LedgerError:
            raise
        except Exception as e:
            raise storage_error(e, "cannot write the imported events") from None

    def started_events(self) -> Iterator[SessionStarted]:
        """Every session's SessionStarted, in the order the sessions were created."""
        topic = TOPICS[SessionStarted]
        start = 1
        while True:
            try:
                page = self.app.recorder.select_notifications(start=start, limit=500, topics=[topic])
            except Exception as e:
                raise storage_error(e, "cannot list sessions") from None
            for n in page:
                yield self.decode(n)
            if len(page) < 500:
                return
            start = page[-1].id + 1

    def notifications(self, start: int, limit: int, topics: Sequence[str] = ()) -> list[Any]:
        """The global event log after notification id ``start`` (exclusive), at most ``limit``
        rows, only ``topics`` if given: what a projection kept beside the store folds from."""
        return self.app.recorder.select_notifications(
            start=start, limit=limit, topics=topics, inclusive_of_start=False
        )

    @property
    def environment(self) -> dict[str, str]:
        """A copy of the eventsourcing environment the store was opened with, for code that opens
        its own recorder on the same database (the fleet view)."""
        return dict(self.app.env)

    @property
    def backend(self) -> str:
        """``"sqlite"``, ``"postgres"`` or ``"memory"``."""
        module = self.app.env.get("PERSISTENCE_MODULE", "")
        return {"eventsourcing.postgres": "postgres", "eventsourcing.sqlite": "sqlite", SQLITE_FACTORY: "sqlite"}.get(module, "memory")

    @property
    def encrypted(self) -> bool:
        """Whether the store encrypts what it writes (its text must not be copied out in plaintext)."""
        return self.app.mapper.cipher is not None

    def plaintext(self, stored: StoredEvent) -> bytes:
        """The payload bytes the hash chain is computed over (decrypted and decompressed)."""
        return self.app.mapper.plaintext(stored)

    def decode_rows(self, owner: UUID, rows: list[tuple[int, str, bytes]]) -> list[Event]:
        return self.app.mapper.decode_rows(owner, rows)

    @property
    def transparent(self) -> bool:
        """Whether stored bytes are the plaintext payloads (neither encrypted nor compressed)."""
        mapper = self.app.mapper
        return mapper.cipher is None and mapper.compressor is None

    def remember_fork(self, session_id: UUID, parent: tuple[UUID, int] | None) -> None:
        self._forks[session_id] = parent

    def forget_fork(self, session_id: UUID) -> None:
        self._forks.pop(session_id, None)


def redact(url: str) -> str:
    """A URL fit for messages: the password never appears."""
    try:
        u = urlparse(url)
    except ValueError:
        return "<unparseable url>"
    if u.password:
        netloc = f"{u.username}:***@{u.hostname}" + (f":{u.port}" if u.port else "")
        return u._replace(netloc=netloc).geturl()
    return url


def error_message(e: BaseException) -> str:
    return getattr(e, "message", None) or str(e) or type(e).__name__


def storage_error(e: BaseException, what: str) -> StorageError:
    text = " ".join(error_message(e).split())  # one line: drivers add DETAIL/HINT lines
    if isinstance(e, (OperationalError, ConnectionError, TimeoutError)) or "connect" in text.lower():
        return StoreUnavailableError(f"{what}: the store is unavailable ({type(e).__name__}: {text})")
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in text:
        return NotALedgerError(f"{what}: the file is not a SQLite database")
    return StorageError(f"{what}: {type(e).__name__}: {text}")
