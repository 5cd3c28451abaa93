"""Full-text search over a session's whole log, as a projection kept beside the store.

``context_search`` must find text the buffer no longer holds (pruned spans, the originals of a
summary, earlier versions of a re-derived summary), and fast on sessions of millions of events, so
it reads an index rather than scanning the log:

- SQLite stores: an FTS5 table per session in a sidecar file next to the ledger (``ledger.db`` ->
  ``ledger.db-search``). Not inside the ledger file: the sidecar is disposable (delete it and it is
  rebuilt from the log), it never takes the ledger's write lock (an index catch-up cannot stall or
  fail an agent's write), and a file checked by ``verify`` and copied by backups stays exactly the log.
- PostgreSQL stores: a table with a ``tsvector`` column and a GIN index in the ledger's database
  (and schema), shared by every process and host that uses the store.
- ``memory://`` stores and encrypted stores: an in-memory SQLite FTS5 table, rebuilt from the log
  once per process (an encrypted store's text must not sit in plaintext beside it).

Every index row is one span text: each ``Observed`` event and each ``Rewritten``/``Rederived``
summary, keyed by its log position. The index remembers the last position it holds and catches up
incrementally before each search; it is keyed by the session id and the session's start time, so a
store deleted and re-created under the same session name is re-indexed, never mixed up.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlparse

import msgspec

from engine.errors import InvalidInputError, StorageError, StoreUnavailableError
from engine.events import Observed, Rederived, Rewritten

if TYPE_CHECKING:
    from engine.session import _Reader

__all__ = ["SearchHit", "SearchIndex", "SqliteSearchIndex", "PostgresSearchIndex", "open_index", "sidecar_path"]

SNIPPET_WORDS = 16
_WORD = re.compile(r"\w+", re.UNICODE)
_CATCH_UP_BATCH = 5_000


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """One span text that matches: where it is in the log and what became of it.

    ``status`` is ``live`` (in the buffer now), ``summarized in dN`` (its text is folded into a live
    summary), ``replaced`` (an earlier text of a re-derived summary) or ``not in context``
    (pruned, or part of a summary that is gone)."""

    span_id: str
    position: int
    role: str
    kind: str
    status: str
    snippet: str


def _rows(events: Iterable[Any]) -> Iterator[tuple[int, str, str, str, str]]:
    for ev in events:
        t = type(ev)
        if t is Observed or t is Rewritten or t is Rederived:
            yield ev.originator_version, ev.span_id, ev.role, ev.kind, ev.text


def _terms(query: str) -> list[str]:
    terms = _WORD.findall(query)
    if not terms:
        raise InvalidInputError(f"the search query {query!r} has no words to look for")
    return terms[:32]


class SearchIndex:
    """The search projection of one store. ``search`` catches up with the session's log first."""

    def catch_up(self, reader: _Reader) -> int:  # pragma: no cover - interface
        """Index the events after the last indexed position; returns how many rows were added."""
        raise NotImplementedError

    def rebuild(self, reader: _Reader) -> int:  # pragma: no cover - interface
        """Drop the session's index and build it again from the first event."""
        raise NotImplementedError

    def _query(self, reader: _Reader, terms: list[str], any_term: bool, want: int) -> list[tuple[int, str, str, str, str]]:
        raise NotImplementedError  # pragma: no cover - interface

    def close(self) -> None:
        pass

    def search(self, reader: _Reader, query: str, *, limit: int = 10, include_live: bool = False) -> list[SearchHit]:
        """Span texts matching every word of ``query`` (or, when none does, any word), best first,
        with snippets. Live spans only with ``include_live``."""
        if not isinstance(query, str):
            raise InvalidInputError(f"the search query must be a str, not {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a positive int; got {limit!r}")
        terms = _terms(query)
        self.catch_up(reader)
        live = reader.state.live
        holders = {src: s.id for s in live.values() if s.derived for src in s.sources}
        hits: list[SearchHit] = []
        for any_term in (False, True) if len(terms) > 1 else (False,):
            want = limit if include_live else limit + min(len(live), 4 * limit)
            while True:
                rows = self._query(reader, terms, any_term, want)
                hits = []
                for position, span_id, role, kind, snippet in rows:
                    current = live.get(span_id)
                    if current is not None:
                        status = "live" if current.position == position or span_id[0] == "o" else "replaced"
                    elif span_id in holders:
                        status = f"summarized in {holders[span_id]}"
                    else:
                        status = "not in context"
                    if status == "live" and not include_live:
                        continue
                    hits.append(SearchHit(span_id=span_id, position=position, role=role, kind=kind, status=status, snippet=snippet))
                    if len(hits) == limit:
                        break
                if len(hits) == limit or len(rows) < want:
                    break
                want *= 4  # live spans took the places: look further down the ranking
            if hits:
                break
        return hits


# -- SQLite FTS5 ------------------------------------------------------------------------------------


def sidecar_path(sqlite_path: str) -> str:
    return f"{sqlite_path}-search"


class SqliteSearchIndex(SearchIndex):
    """FTS5 tables (one per session) in a SQLite file, or in memory with ``path=":memory:"``."""

    def __init__(self, path: str = ":memory:"):
        self.path = path
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
            if path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS indexed (session TEXT PRIMARY KEY, started TEXT NOT NULL, position INTEGER NOT NULL)"
            )
        except sqlite3.Error as e:
            raise StorageError(f"cannot open the search index {path}: {e}") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def _table(reader: _Reader) -> str:
        return f"fts_{reader.id.hex}"

    def _indexed(self, reader: _Reader) -> int:
        """The last position indexed for this session (0 for none), resetting a stale index."""
        started = str(reader.state.started_at)
        row = self._db.execute("SELECT started, position FROM indexed WHERE session = ?", (reader.id.hex,)).fetchone()
        if row is not None and row[0] == started and row[1] <= reader.position:
            return row[1]
        table = self._table(reader)
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(f"DROP TABLE IF EXISTS {table}")
            self._db.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5(body, span_id UNINDEXED, role UNINDEXED, kind UNINDEXED, "
                "tokenize = 'unicode61')"
            )
            self._db.execute(
                "INSERT OR REPLACE INTO indexed (session, started, position) VALUES (?, ?, 0)", (reader.id.hex, started)
            )
        return 0

    def catch_up(self, reader: _Reader) -> int:
        with self._lock:
            try:
                last = self._indexed(reader)
                head = reader.position
                if last >= head:
                    return 0
                table = self._table(reader)
                added = 0
                start = last + 1
                while start <= head:
                    stop = min(head, start + _CATCH_UP_BATCH * 4 - 1)
                    rows = [(p, text, sid, role, kind) for p, sid, role, kind, text in _rows(reader.events(start, stop))]
                    with self._db:
                        self._db.execute("BEGIN IMMEDIATE")
                        # another process may have indexed these positions meanwhile
                        done = self._db.execute("SELECT position FROM indexed WHERE session = ?", (reader.id.hex,)).fetchone()[0]
                        rows = [r for r in rows if r[0] > done]
                        self._db.executemany(
                            f"INSERT INTO {table} (rowid, body, span_id, role, kind) VALUES (?, ?, ?, ?, ?)", rows
                        )
                        self._db.execute(
                            "UPDATE indexed SET position = ? WHERE session = ?", (max(stop, done), reader.id.hex)
                        )
                    added += len(rows)
                    start = stop + 1
                return added
            except sqlite3.Error as e:
                raise StorageError(f"cannot update the search index {self.path}: {e}") from None

    def rebuild(self, reader: _Reader) -> int:
        with self._lock:
            self._db.execute("DELETE FROM indexed WHERE session = ?", (reader.id.hex,))
        return self.catch_up(reader)

    def _query(self, reader: _Reader, terms: list[str], any_term: bool, want: int) -> list[tuple[int, str, str, str, str]]:
        match = (" OR " if any_term else " ").join('"' + t.replace('"', '""') + '"' for t in terms)
        table = self._table(reader)
        with self._lock:
            try:
                return self._db.execute(
                    f"SELECT rowid, span_id, role, kind, snippet({table}, 0, '«', '»', '…', {SNIPPET_WORDS}) "
                    f"FROM {table} WHERE {table} MATCH ? AND rowid <= ? ORDER BY rank LIMIT ?",
                    (match, reader.position, want),
                ).fetchall()
            except sqlite3.Error as e:
                raise StorageError(f"cannot search the index {self.path}: {e}") from None


# -- PostgreSQL tsvector + GIN ----------------------------------------------------------------------


class PostgresSearchIndex(SearchIndex):
    """A ``tsvector`` column with a GIN index in the store's own PostgreSQL database."""

    def __init__(self, url: str):
        import psycopg

        u = urlparse(url)
        query = {k: v[-1] for k, v in parse_qs(u.query).items()}
        schema = query.get("schema", "")
        if schema and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
            raise InvalidInputError(f"schema name {schema!r} is not a plain identifier")
        prefix = f'"{schema}".' if schema else ""
        self.table = f"{prefix}ctxledger_search"
        self.state_table = f"{prefix}ctxledger_search_indexed"
        try:
            self._db = psycopg.connect(
                host=u.hostname or "127.0.0.1",
                port=u.port or 5432,
                user=unquote(u.username or "postgres"),
                password=unquote(u.password or "") or None,
                dbname=unquote(u.path.lstrip("/")) or "postgres",
                connect_timeout=int(query.get("connect_timeout", "5")),
                autocommit=True,
            )
        except psycopg.Error as e:
            raise StoreUnavailableError(f"cannot connect to the search index database: {str(e).strip()}") from None
        self._lock = threading.Lock()
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(hashtext('ctxledger_search_ddl'))")
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.state_table} (session uuid PRIMARY KEY, started text NOT NULL, "
                "position bigint NOT NULL)"
            )
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (session uuid NOT NULL, position bigint NOT NULL, "
                "span_id text NOT NULL, role text NOT NULL, kind text NOT NULL, body text NOT NULL, "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, "
                "PRIMARY KEY (session, position))"
            )
            self._db.execute(
                f"CREATE INDEX IF NOT EXISTS ctxledger_search_tsv ON {self.table} USING gin (tsv)"
            )

    def close(self) -> None:
        self._db.close()

    def _indexed(self, reader: _Reader) -> int:
        started = str(reader.state.started_at)
        row = self._db.execute(
            f"SELECT started, position FROM {self.state_table} WHERE session = %s", (reader.id,)
        ).fetchone()
        if row is not None and row[0] == started and row[1] <= reader.position:
            return row[1]
        with self._db.transaction():
            self._db.execute(f"DELETE FROM {self.table} WHERE session = %s", (reader.id,))
            self._db.execute(
                f"INSERT INTO {self.state_table} (session, started, position) VALUES (%s, %s, 0) "
                "ON CONFLICT (session) DO UPDATE SET started = EXCLUDED.started, position = 0",
                (reader.id, started),
            )
        return 0

    def catch_up(self, reader: _Reader) -> int:
        import psycopg

        with self._lock:
            try:
                last = self._indexed(reader)
                head = reader.position
                added = 0
                start = last + 1
                while start <= head:
                    stop = min(head, start + _CATCH_UP_BATCH * 4 - 1)
                    rows = [(reader.id, p, sid, role, kind, text.replace("\x00", "")) for p, sid, role, kind, text in _rows(reader.events(start, stop))]
                    with self._db.transaction():
                        done = self._db.execute(
                            f"SELECT position FROM {self.state_table} WHERE session = %s FOR UPDATE", (reader.id,)
                        ).fetchone()[0]
                        rows = [r for r in rows if r[1] > done]
                        with self._db.cursor() as cur:
                            with cur.copy(
                                f"COPY {self.table} (session, position, span_id, role, kind, body) FROM STDIN"
                            ) as copy:
                                for r in rows:
                                    copy.write_row(r)
                        self._db.execute(
                            f"UPDATE {self.state_table} SET position = %s WHERE session = %s", (max(stop, done), reader.id)
                        )
                    added += len(rows)
                    start = stop + 1
                return added
            except psycopg.OperationalError as e:
                raise StoreUnavailableError(f"the search index database went away: {str(e).strip()}") from None
            except psycopg.Error as e:
                raise StorageError(f"cannot update the search index: {str(e).strip()}") from None

    def rebuild(self, reader: _Reader) -> int:
        with self._lock:
            self._db.execute(f"DELETE FROM {self.state_table} WHERE session = %s", (reader.id,))
        return self.catch_up(reader)

    def _query(self, reader: _Reader, terms: list[str], any_term: bool, want: int) -> list[tuple[int, str, str, str, str]]:
        import psycopg

        words = [t.lower() for t in terms]
        tsquery = (" | " if any_term else " & ").join("'" + w.replace("'", "''").replace("\\", "") + "'" for w in words)
        with self._lock:
            try:
                return self._db.execute(
                    f"SELECT position, span_id, role, kind, ts_headline('simple', body, q, "
                    f"'StartSel=«, StopSel=», MaxWords={SNIPPET_WORDS}, MinWords=4, MaxFragments=1, FragmentDelimiter=…') "
                    f"FROM (SELECT position, span_id, role, kind, body, q, ts_rank(tsv, q) AS r "
                    f"      FROM {self.table}, to_tsquery('simple', %s) AS q "
                    f"      WHERE session = %s AND position <= %s AND tsv @@ q ORDER BY r DESC, position DESC LIMIT %s) AS top "
                    f"ORDER BY r DESC, position DESC",
                    (tsquery, reader.id, reader.position, want),
                ).fetchall()
            except psycopg.OperationalError as e:
                raise StoreUnavailableError(f"the search index database went away: {str(e).strip()}") from None
            except psycopg.Error as e:
                raise StorageError(f"cannot search the index: {str(e).strip()}") from None


# -- choosing the index for a store -----------------------------------------------------------------

_OPEN: dict[str, SearchIndex] = {}
_OPEN_LOCK = threading.Lock()


def open_index(url: str | None = None, *, encrypted: bool = False) -> SearchIndex:
    """The search index for the store at ``url`` (shared within the process); an in-memory one for
    ``None``, ``memory://`` or an encrypted store."""
    if url is None or encrypted or url.startswith("memory:"):
        return SqliteSearchIndex(":memory:")
    with _OPEN_LOCK:
        index = _OPEN.get(url)
        if index is None:
            if url.startswith("sqlite://"):
                path = unquote(url[len("sqlite://") :][1:].split("?", 1)[0])
                index = SqliteSearchIndex(sidecar_path(path))
            elif url.startswith(("postgresql://", "postgres://")):
                index = PostgresSearchIndex(url)
            else:
                raise InvalidInputError(f"no search index for store URL {url!r}")
            _OPEN[url] = index
        return index
