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
RANK_WINDOW = 500  # any-word matches are ranked among this many most recent ones
_TOKEN = re.compile(r"[^\W_]+")  # what the tokenizers index as one token: letters and digits
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


def _terms(query: str) -> list[tuple[str, ...]]:
    """The query's words, each a tuple of its tokens (``INC-4411`` -> ``("inc", "4411")``, matched
    as a phrase: the tokens next to each other, as written)."""
    if not isinstance(query, str):
        raise InvalidInputError(f"the search query must be a str, not {type(query).__name__}")
    groups = [tuple(t.lower() for t in _TOKEN.findall(word)) for word in query.split()]
    groups = list(dict.fromkeys(g for g in groups if g))
    if not groups:
        raise InvalidInputError(f"the search query {query!r} has no words to look for")
    return groups[:32]


class SearchIndex:
    """The search projection of one store. ``search`` catches up with the session's log first."""

    def catch_up(self, reader: _Reader) -> int:  # pragma: no cover - interface
        """Index the events after the last indexed position; returns how many rows were added."""
        raise NotImplementedError

    def rebuild(self, reader: _Reader) -> int:  # pragma: no cover - interface
        """Drop the session's index and build it again from the first event."""
        raise NotImplementedError

    def _candidates(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, below: int, n: int) -> list[tuple[int, float]]:
        """Up to ``n`` matches at positions <= ``below``, newest first: (position, score), a lower
        score being a better match."""
        raise NotImplementedError  # pragma: no cover - interface

    def _details(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, positions: list[int]) -> dict[int, tuple[str, str, str, str]]:
        """(span id, role, kind, snippet) of the rows at ``positions``."""
        raise NotImplementedError  # pragma: no cover - interface

    def close(self) -> None:
        pass

    def search(self, reader: _Reader, query: str, *, limit: int = 10, include_live: bool = False,
               any_words: bool = True) -> list[SearchHit]:
        """Span texts with every word of ``query``, newest first; when no text has them all, the
        texts with the most of them among the ``RANK_WINDOW`` newest that have any. A word with
        punctuation (``INC-4411``, ``billing-api``) matches as written. The cost stays bounded however
        common the words are. Live spans only with ``include_live``; ``any_words=False``: no fallback
        (texts with every word only)."""
        if not isinstance(query, str):
            raise InvalidInputError(f"the search query must be a str, not {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit must be a positive int; got {limit!r}")
        terms = _terms(query)
        self.catch_up(reader)
        live = reader.state.live
        # a row is live when its position is where a live span's text came from
        skip = set() if include_live else {s.position for s in live.values()}
        found: list[tuple[float, int]] = []
        for any_term in (False, True) if len(terms) > 1 and any_words else (False,):
            below = reader.position
            window = RANK_WINDOW if any_term else limit
            while len(found) < window and below > 0:
                want = window + len(skip)  # enough rows to hold the window once live ones are skipped
                page = self._candidates(reader, terms, any_term, below, want)
                found += [(score, -p) for p, score in page if p not in skip]
                if len(page) < want:
                    break
                below = page[-1][0] - 1
            if found:
                break
        best = sorted(found)[:limit]
        details = self._details(reader, terms, any_term, [-p for _, p in best])
        holders = {src: s.id for s in live.values() if s.sources for src in s.sources} if best else {}
        hits = []
        for _, neg in best:
            position = -neg
            span_id, role, kind, snippet = details[position]
            current = live.get(span_id)
            if current is not None:
                status = "live" if current.position == position else "replaced"
            elif span_id in holders:
                status = f"summarized in {holders[span_id]}"
            else:
                status = "not in context"
            hits.append(SearchHit(span_id=span_id, position=position, role=role, kind=kind, status=status, snippet=snippet))
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

    def covers(self, reader: _Reader) -> bool:
        """Bring the index up to ``reader`` unless it holds its positions already (a view of an
        earlier position reads the rows up to it; ``catch_up`` would start the index over).
        False when the index cannot answer (not writable, damaged): read the log instead."""
        try:
            with self._lock:
                row = self._db.execute("SELECT started, position FROM indexed WHERE session = ?", (reader.id.hex,)).fetchone()
            if row is None or row[0] != str(reader.state.started_at) or row[1] < reader.position:
                self.catch_up(reader)
            return True
        except (StorageError, sqlite3.Error):
            return False

    def rows_matching(self, reader: _Reader, match: str, upto: int) -> list[tuple[int, str, str]]:
        """(position, span id, text) of the rows at positions <= ``upto`` that match the FTS5
        expression ``match`` (call ``covers`` first)."""
        table = self._table(reader)
        with self._lock:
            try:
                return self._db.execute(
                    f"SELECT rowid, span_id, body FROM {table} WHERE {table} MATCH ? AND rowid <= ?", (match, upto)
                ).fetchall()
            except sqlite3.Error as e:
                raise StorageError(f"cannot search the index {self.path}: {e}") from None

    def terms_like(self, reader: _Reader, pattern: str, limit: int) -> list[str]:
        """Up to ``limit`` distinct indexed tokens matching the LIKE ``pattern`` (the index's
        vocabulary, through a temporary fts5vocab table; nothing is written to the file)."""
        table = self._table(reader)
        vocab = f"temp.vocab_{reader.id.hex}"
        with self._lock:
            try:
                self._db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, row)")
                rows = self._db.execute(
                    f"SELECT term FROM {vocab} WHERE term LIKE ? ESCAPE '\\' LIMIT ?", (pattern, limit)
                ).fetchall()
            except sqlite3.Error as e:
                raise StorageError(f"cannot search the index {self.path}: {e}") from None
        return [r[0] for r in rows]

    def rebuild(self, reader: _Reader) -> int:
        with self._lock:
            self._db.execute("DELETE FROM indexed WHERE session = ?", (reader.id.hex,))
        return self.catch_up(reader)

    @staticmethod
    def _match(terms: list[tuple[str, ...]], any_term: bool) -> str:
        return (" OR " if any_term else " ").join('"' + " ".join(t).replace('"', '""') + '"' for t in terms)

    def _candidates(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, below: int, n: int) -> list[tuple[int, float]]:
        """Every match has every word (an AND): the newest come first. In the any-word fallback the
        matches with more of the words come first. (bm25 is not used: its document frequencies make
        a query of common words cost time in proportion to the log.)"""
        table = self._table(reader)
        with self._lock:
            try:
                if not any_term:
                    rows = self._db.execute(
                        f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT ?",
                        (self._match(terms, any_term), below, n),
                    ).fetchall()
                    return [(r[0], 0.0) for r in rows]
                rows = self._db.execute(
                    f"SELECT rowid, body FROM {table} WHERE {table} MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT ?",
                    (self._match(terms, any_term), below, n),
                ).fetchall()
            except sqlite3.Error as e:
                raise StorageError(f"cannot search the index {self.path}: {e}") from None
        out = []
        for rowid, body in rows:
            words = " ".join(_TOKEN.findall(body.lower()))
            out.append((rowid, -float(sum(f" {' '.join(t)} " in f" {words} " for t in terms))))
        return out

    def _details(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, positions: list[int]) -> dict[int, tuple[str, str, str, str]]:
        if not positions:
            return {}
        table = self._table(reader)
        # One query over the positions' range, not one per position: FTS5 does not look up ``rowid IN``,
        # but a rowid range beside MATCH is cheap, and the candidates are the newest matches below a
        # bound, so the range holds few other matches (each query costs its MATCH set-up: 200 of them
        # were ~1 ms each on a 1M-event session, most of a search's time).
        sql = (
            f"SELECT rowid, span_id, role, kind, snippet({table}, 0, '«', '»', '…', {SNIPPET_WORDS}) FROM {table} "
            f"WHERE {table} MATCH ? AND rowid >= ? AND rowid <= ?"
        )
        wanted = set(positions)
        with self._lock:
            try:
                rows = self._db.execute(sql, (self._match(terms, any_term), min(wanted), max(wanted))).fetchall()
            except sqlite3.Error as e:
                raise StorageError(f"cannot search the index {self.path}: {e}") from None
        return {r[0]: r[1:] for r in rows if r[0] in wanted}


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

    @staticmethod
    def _tsquery(terms: list[tuple[str, ...]], any_term: bool) -> str:
        phrases = ["(" + " <-> ".join("'" + w.replace("'", "''").replace("\\", "") + "'" for w in t) + ")" for t in terms]
        return (" | " if any_term else " & ").join(phrases)

    def _run(self, sql: str, params: tuple) -> list[tuple]:
        import psycopg

        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except psycopg.OperationalError as e:
                raise StoreUnavailableError(f"the search index database went away: {str(e).strip()}") from None
            except psycopg.Error as e:
                raise StorageError(f"cannot search the index: {str(e).strip()}") from None

    def _candidates(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, below: int, n: int) -> list[tuple[int, float]]:
        rows = self._run(
            f"SELECT position, ts_rank(tsv, q) FROM {self.table}, to_tsquery('simple', %s) AS q "
            "WHERE session = %s AND position <= %s AND tsv @@ q ORDER BY position DESC LIMIT %s",
            (self._tsquery(terms, any_term), reader.id, below, n),
        )
        # every word: the newest first; any word: a higher ts_rank (more of the words) first
        return [(p, -rank if any_term else 0.0) for p, rank in rows]

    def _details(self, reader: _Reader, terms: list[tuple[str, ...]], any_term: bool, positions: list[int]) -> dict[int, tuple[str, str, str, str]]:
        if not positions:
            return {}
        rows = self._run(
            f"SELECT position, span_id, role, kind, ts_headline('simple', body, q, "
            f"'StartSel=«, StopSel=», MaxWords={SNIPPET_WORDS}, MinWords=4, MaxFragments=1, FragmentDelimiter=…') "
            f"FROM {self.table}, to_tsquery('simple', %s) AS q WHERE session = %s AND position = ANY(%s)",
            (self._tsquery(terms, any_term), reader.id, positions),
        )
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


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
