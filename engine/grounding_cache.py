"""Grounding results kept as a projection: a derived span is checked once, not by every command.

A grounding result depends only on the derived text, what its summarizer saw (each source's text,
role, harness tag and tool call id: ``projections.grounding.evidence.source_of``) and the checker.
In an append-only log none of these change for a derived span at a given event position, so
``audit``, ``blame``, the report, the fleet view, the viewer, ``lost`` and the hooks read the result
computed the first time instead of recomputing it.

Rows are keyed by (session id, derived span id, the span's event position, checker id). The checker
id is the checker's class, name and ``version`` (the lexical checker's version is a hash of its
rules' code, so any change to a rule misses every old row). A checker without a ``version`` (a model
judge) is never cached: nothing says when its answers change. Each row also stores a digest of the
inputs (text and sources); a read whose digest differs is a miss, so a row can never answer for
other inputs than the ones it was computed from.

Where the rows live (the projection is disposable: drop the table and it is rebuilt on demand):

- SQLite stores: the ``grounding_results`` table in the ledger's own database file, beside the
  fleet view's tables;
- PostgreSQL stores: a ``ctxledger_grounding`` table in the ledger's database (and schema);
- ``memory://`` and encrypted stores: a dict in the process (an encrypted store's findings quote its
  text, which must not sit in plaintext beside it).

A cache that cannot be written (a read-only file, a database another writer holds for more than two
seconds) only costs the recomputation: the result is still returned, never an error.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

import msgspec

from engine.errors import InvalidInputError

if TYPE_CHECKING:  # the checker loads when a result is first computed or read (``lost`` reads none)
    from projections.grounding import GroundingResult
    from projections.grounding.checker import Checker
    from projections.grounding.evidence import Source

__all__ = [
    "GroundingCache",
    "MemoryGroundingCache",
    "SqliteGroundingCache",
    "PostgresGroundingCache",
    "checker_id",
    "input_digest",
    "open_cache",
    "TABLE",
]

TABLE = "grounding_results"


class _Stored(msgspec.Struct, array_like=True):
    findings: list[dict]
    specifics: int
    source_specifics: int
    dropped: list[str]


_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(_Stored)
_PACK = msgspec.msgpack.Encoder()


def checker_id(checker: Checker | None) -> str | None:
    """What identifies a checker's results: class, name and version; None for a checker without a
    ``version`` (its results are not cached)."""
    if checker is None:
        from projections.grounding.checker import LexicalChecker

        checker = LexicalChecker()
    version = getattr(checker, "version", None)
    if not isinstance(version, str) or not version:
        return None
    return f"{type(checker).__module__}.{type(checker).__qualname__}:{checker.name}@{version}"


def input_digest(text: str, sources: Sequence[Source]) -> str:
    """A digest of everything a check reads: the derived text and each source's fields (msgpack is
    length-prefixed, so no two different inputs encode alike)."""
    payload = _PACK.encode((text, [(s.text, s.role, s.harness, s.call) for s in sources]))
    return hashlib.blake2b(payload, digest_size=20).hexdigest()


def _encode(result: GroundingResult) -> bytes:
    return _ENCODE.encode(_Stored(result.findings, result.specifics, result.source_specifics, result.dropped))


def _decode(data: bytes | str) -> GroundingResult | None:
    from projections.grounding import GroundingResult

    try:
        s = _DECODE.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # a damaged row is a miss
    return GroundingResult(findings=s.findings, specifics=s.specifics, source_specifics=s.source_specifics, dropped=s.dropped)


class GroundingCache:
    """The hook audit and blame call instead of ``run_checker``: ``check`` returns the stored result
    for these inputs, or computes, stores and returns it. Subclasses keep the rows."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0

    def _get(self, key: tuple[str, str, int, str]) -> tuple[str, bytes | str] | None:  # pragma: no cover
        raise NotImplementedError

    def _put(self, key: tuple[str, str, int, str], digest: str, data: bytes) -> None:  # pragma: no cover
        raise NotImplementedError

    def clear(self) -> None:  # pragma: no cover - interface
        """Drop every row (the projection is rebuilt on demand)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def check(
        self, session_id: Any, span_id: str, position: int, checker: Checker | None, text: str, sources: Sequence[str | Source]
    ) -> GroundingResult:
        """``run_checker(checker, text, sources)``, computed once per (session, span, position, checker)."""
        from projections.grounding.checker import run_checker
        from projections.grounding.evidence import as_sources

        cid = checker_id(checker)
        if cid is None:
            return run_checker(checker, text, sources)
        srcs = as_sources(sources)
        key = (str(session_id), span_id, int(position), cid)
        digest = input_digest(text, srcs)
        row = self._get(key)
        if row is not None and row[0] == digest:
            result = _decode(row[1])
            if result is not None:
                self.hits += 1
                return result
        self.misses += 1
        result = run_checker(checker, text, srcs)
        self._put(key, digest, _encode(result))
        # what every caller gets is the stored form, so a hit and a miss return equal results
        return _decode(_encode(result)) or result


    def kept(self, session_id: Any, span_id: str, position: int, kind: str, digest: str,
             compute: Any, encode: Any, decode: Any) -> Any:
        """Another pure function of a derived span's inputs kept beside the grounding results
        (``engine.lost_kept``): ``kind`` names the function and its version, ``digest`` its
        inputs; ``decode(encode(result))`` is what every caller gets, hit or miss."""
        key = (str(session_id), span_id, int(position), kind)
        row = self._get(key)
        if row is not None and row[0] == digest:
            try:
                result = decode(bytes(row[1]) if not isinstance(row[1], (bytes, str)) else row[1])
            except Exception:  # noqa: BLE001 - a damaged row is a miss
                result = None
            if result is not None:
                self.hits += 1
                return result
        self.misses += 1
        data = encode(compute())
        self._put(key, digest, data)
        return decode(data)


class MemoryGroundingCache(GroundingCache):
    """Rows in a dict, for ``memory://`` and encrypted stores (and tests)."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[tuple[str, str, int, str], tuple[str, bytes]] = {}
        self._lock = threading.Lock()

    def _get(self, key):
        with self._lock:
            return self._rows.get(key)

    def _put(self, key, digest, data):
        with self._lock:
            self._rows[key] = (digest, data)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)


class SqliteGroundingCache(GroundingCache):
    """Rows in the ``grounding_results`` table of a SQLite file (the ledger's own)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            db = None
            try:
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=2)
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} (session TEXT NOT NULL, span_id TEXT NOT NULL, "
                    "position INTEGER NOT NULL, checker TEXT NOT NULL, digest TEXT NOT NULL, result BLOB NOT NULL, "
                    "PRIMARY KEY (session, span_id, position, checker)) WITHOUT ROWID"
                )
                self._db = db
            except sqlite3.Error as e:
                if db is not None:
                    db.close()
                # a busy file is tried again next time; anything else (a read-only file, not a
                # database) for good: results are computed, not kept
                self._broken = not any(w in str(e) for w in ("locked", "busy"))
        return self._db

    def _get(self, key):
        with self._lock:
            db = self._conn()
            if db is None:
                return None
            try:
                return db.execute(
                    f"SELECT digest, result FROM {TABLE} WHERE session=? AND span_id=? AND position=? AND checker=?", key
                ).fetchone()
            except sqlite3.Error:
                return None

    def _put(self, key, digest, data):
        with self._lock:
            db = self._conn()
            if db is None:
                return
            try:
                db.execute(
                    f"INSERT OR REPLACE INTO {TABLE} (session, span_id, position, checker, digest, result) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, digest, data),
                )
            except sqlite3.Error:
                pass  # locked or read-only: the result was computed and is returned anyway

    def clear(self) -> None:
        with self._lock:
            db = self._conn()
            if db is not None:
                db.execute(f"DELETE FROM {TABLE}")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class PostgresGroundingCache(GroundingCache):
    """Rows in a ``ctxledger_grounding`` table of the store's PostgreSQL database (connected on first
    use; a database that cannot be reached only costs the recomputation)."""

    def __init__(self, url: str):
        super().__init__()
        u = urlparse(url)
        query = {k: v[-1] for k, v in parse_qs(u.query).items()}
        schema = query.get("schema", "")
        if schema and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
            raise InvalidInputError(f"schema name {schema!r} is not a plain identifier")
        self.table = (f'"{schema}".' if schema else "") + "ctxledger_grounding"
        self._params = dict(
            host=u.hostname or "127.0.0.1",
            port=u.port or 5432,
            user=unquote(u.username or "postgres"),
            password=unquote(u.password or "") or None,
            dbname=unquote(u.path.lstrip("/")) or "postgres",
            connect_timeout=int(query.get("connect_timeout", "5")),
            autocommit=True,
        )
        self._db: Any = None
        self._broken = False
        self._lock = threading.Lock()

    def _conn(self) -> Any:
        if self._db is None and not self._broken:
            import psycopg

            try:
                db = psycopg.connect(**self._params)
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(hashtext('ctxledger_grounding_ddl'))")
                    db.execute(
                        f"CREATE TABLE IF NOT EXISTS {self.table} (session text NOT NULL, span_id text NOT NULL, "
                        "position bigint NOT NULL, checker text NOT NULL, digest text NOT NULL, result bytea NOT NULL, "
                        "PRIMARY KEY (session, span_id, position, checker))"
                    )
                self._db = db
            except psycopg.Error:
                self._broken = True
        return self._db

    def _get(self, key):
        import psycopg

        with self._lock:
            db = self._conn()
            if db is None:
                return None
            try:
                row = db.execute(
                    f"SELECT digest, result FROM {self.table} WHERE session=%s AND span_id=%s AND position=%s AND checker=%s",
                    key,
                ).fetchone()
            except psycopg.Error:
                return None
        return None if row is None else (row[0], bytes(row[1]))

    def _put(self, key, digest, data):
        import psycopg

        with self._lock:
            db = self._conn()
            if db is None:
                return
            try:
                db.execute(
                    f"INSERT INTO {self.table} (session, span_id, position, checker, digest, result) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session, span_id, position, checker) "
                    "DO UPDATE SET digest = excluded.digest, result = excluded.result",
                    (*key, digest, data),
                )
            except psycopg.Error:
                pass

    def clear(self) -> None:
        with self._lock:
            db = self._conn()
            if db is not None:
                db.execute(f"DELETE FROM {self.table}")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def open_cache(url: str | None, *, encrypted: bool = False) -> GroundingCache:
    """The grounding cache for the store at ``url``: a table beside the log, or a dict for
    ``memory://``, encrypted stores and anything else."""
    if url is None or encrypted or url.startswith("memory:"):
        return MemoryGroundingCache()
    if url.startswith("sqlite://"):
        path = unquote(url[len("sqlite://") :][1:].split("?", 1)[0])
        if path and path != ":memory:" and Path(path).exists():
            return SqliteGroundingCache(path)
        return MemoryGroundingCache()
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresGroundingCache(url)
    return MemoryGroundingCache()
