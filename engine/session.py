"""The Session aggregate (write side) and its read-only views.

Every command checks the rules against the live buffer state, then emits one event. The state is the
buffer projection itself (``projections.buffer.apply``), never a second copy of the logic.
"""

from __future__ import annotations

import contextlib
import itertools
from datetime import datetime
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from engine import validate
from engine._store.chain import ChainWalk, verify_chain
from engine.verification import VerifyResult
from engine._store.codec import chain_hash, encode_event
from engine.errors import (
    CorruptLogError,
    InvalidInputError,
    LedgerError,
    PositionOutOfRangeError,
    RewritePolicyError,
    SpanNotLiveError,
    SpanStateError,
    StoreUnavailableError,
    UnknownSpanError,
)
from engine.events import (
    Event,
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    now,
)
from engine.rewriter_call import call_rewriter
from engine.spans import OBSERVED_KINDS, ROLES, Provenance, Span, derived_id, ordinal
from engine._store.log_store import LogStore
from engine.tokens import TokenCounter
from projections.buffer import BufferState, apply, span_from_event

if TYPE_CHECKING:  # the checker loads when a session first checks something (a store-only run never does)
    from projections.grounding.checker import Checker

_force_setattr = msgspec.structs.force_setattr
_OBSERVED_KINDS = OBSERVED_KINDS

__all__ = ["Session", "SessionView", "VerifyResult"]


class _Reader:
    """What a live session and a time-travel view share: reading the buffer and the log."""

    _store: LogStore
    _state: BufferState
    checker: Checker | None = None  # judges derived spans in audit, blame and the gate (None: lexical)
    grounding_cache: Any = None  # the ledger's kept grounding results (engine.grounding_cache), if any
    blame_finder: Any = None  # blame's facts through the search index (engine.blame_index), if any

    @property
    def id(self) -> UUID:
        return self._state.session_id

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def strict(self) -> bool:
        return self._state.strict

    @property
    def position(self) -> int:
        """Number of events in the session's log (at this view)."""
        return self._state.version

    @property
    def tokens(self) -> int:
        """Live tokens in the buffer."""
        return self._state.tokens

    @property
    def state(self) -> BufferState:
        return self._state

    def spans(self) -> list[Span]:
        """The live buffer, in order."""
        return self._state.spans()

    def span(self, span_id: str) -> Span:
        """A live span by id."""
        self._check_known(span_id)
        try:
            return self._state.live[span_id]
        except KeyError:
            raise SpanNotLiveError(self._not_live_message(span_id), span_id=span_id) from None

    def marks(self) -> dict[str, int]:
        return dict(self._state.marks)

    # -- the log ---------------------------------------------------------------------------

    def _unsaved(self) -> tuple[int, Sequence[Event]]:
        """(the last stored position, the events after it that are not stored yet): inside an open
        ``batch()`` the newest commands are part of the log but wait to be written."""
        return self.position, ()

    def events(self, start: int = 1, stop: int | None = None) -> Iterator[Event]:
        """The log itself, in order: events ``start`` through ``stop`` inclusive (1-based), including
        the commands of an open ``batch()`` that are not stored yet."""
        last = self.position if stop is None else min(stop, self.position)
        if not isinstance(start, int) or start < 1:
            raise PositionOutOfRangeError(f"start must be a position >= 1; got {start!r}")
        stored, pending = self._unsaved()
        head = self._store.iter_events(self.id, start, min(last, stored))
        if last <= stored:
            return head
        return itertools.chain(head, pending[max(start, stored + 1) - stored - 1 : last - stored])

    def event(self, position: int) -> Event:
        """The event at ``position`` (1-based), read back from the log."""
        self._check_position(position)
        return self._load(position)

    def chain_walk(self) -> ChainWalk:
        """A walk of the hash chain from the first event to this position (the unsaved events of an
        open ``batch()`` included): ``pages()`` yields the verified events a page at a time and
        stops at the first that does not verify; ``ok`` says whether the chain held."""
        return ChainWalk(self._store, self.id, self.position, pending=self._unsaved()[1])

    def _load(self, position: int) -> Event:
        stored, pending = self._unsaved()
        if position > stored:
            return pending[position - stored - 1]
        return self._store.read_event(self.id, position)

    def original(self, span_id: str) -> Span:
        """An observed span read back from the log (the cold store), live, pruned or rewritten."""
        self._check_known(span_id)
        if not span_id.startswith("o"):
            raise SpanStateError(
                f"{span_id} is a derived span; original() reads observed spans "
                f"(its sources are {', '.join(self._sources_of(span_id)) or 'unknown'})",
                span_id=span_id,
            )
        live = self._state.live.get(span_id)
        if live is not None:
            return live
        return span_from_event(self.observation(ordinal(span_id)))

    def originals(self, span_id: str) -> list[Span]:
        """The observed originals a derived span was made from, read back from the log."""
        span = self._derived_span(span_id)
        return [span_from_event(ev) for ev in self._load_many(span.source_positions)]

    def _load_many(self, positions: Sequence[int]) -> list[Event]:
        """The events at ``positions``: a summary's sources are mostly one run of the log, read in
        pages (one query per thousand rows, not one per event) when they fill most of their range."""
        stored, _ = self._unsaved()
        inside = [p for p in positions if 1 <= p <= stored]
        if len(inside) < 32 or max(inside) - min(inside) + 1 > 2 * len(inside):
            return [self._load(p) for p in positions]
        wanted = set(inside)
        try:
            got = {ev.originator_version: ev for ev in self._store.iter_events(self.id, min(inside), max(inside))
                   if ev.originator_version in wanted}
        except CorruptLogError:  # a damaged row in the range: only a source's own damage is an error
            return [self._load(p) for p in positions]
        return [got[p] if p in got else self._load(p) for p in positions]

    def _derived_span(self, span_id: str) -> Span:
        self._check_known(span_id)
        span = self._state.live.get(span_id)
        if span is None:
            ev = self._last_touch(span_id)
            content = self._content_event(span_id)
            if content is None:
                raise SpanNotLiveError(self._not_live_message(span_id, ev), span_id=span_id)
            span = span_from_event(content)
        if span.provenance is not Provenance.DERIVED:
            raise SpanStateError(f"{span_id} is an observed span, not a derived one", span_id=span_id)
        return span

    def _sources_of(self, span_id: str) -> tuple[str, ...]:
        content = self._content_event(span_id)
        return getattr(content, "sources", ()) if content is not None else ()

    def observation(self, k: int) -> Observed:
        """The event that observed ``o{k}``. Binary search of the log for the event that observed ``o{k}``: a few primary-key page
        reads, so the state never needs an index that grows with the log."""
        stored, pending = self._unsaved()
        for ev in pending:
            if type(ev) is Observed and ev.span_id == f"o{k}":
                return ev
        lo, hi = k + 1, stored
        while lo <= hi:
            mid = (lo + hi) // 2
            ev = self._store.first_of_type(self.id, Observed, mid, hi)
            if ev is None:
                hi = mid - 1
                continue
            j = ordinal(ev.span_id)
            if j == k:
                return ev
            if j < k:
                lo = ev.originator_version + 1
            else:
                hi = mid - 1
        raise UnknownSpanError(f"o{k} is not in the log of session {self.name!r}", span_id=f"o{k}")

    def _reverse(self, span_id: str) -> Iterator[Event]:
        """Events from the newest back to the first, at least those that name ``span_id`` (the log
        is scanned from the head; rows that cannot name it are skipped without being decoded)."""
        stored, pending = self._unsaved()
        yield from reversed(pending)
        yield from self._store.iter_events_desc(self.id, stored, needle=_needle(span_id))

    def _last_touch(self, span_id: str) -> Event | None:
        """The newest event that changed whether ``span_id`` is live (a scan from the head: only
        restore and error messages need it)."""
        for ev in self._reverse(span_id):
            if _touches(ev, span_id):
                return ev
        return None

    def _content_event(self, span_id: str) -> Event | None:
        """The newest event that set ``span_id``'s text (Observed, Rewritten or Rederived)."""
        for ev in self._reverse(span_id):
            if isinstance(ev, (Observed, Rewritten, Rederived)) and ev.span_id == span_id:
                return ev
        return None

    # -- checks ----------------------------------------------------------------------------

    def check_span_id(self, span_id: Any) -> None:
        """Raise ``UnknownSpanError`` unless ``span_id`` names a span this session has had by now
        (live or not); ``InvalidInputError`` when it is not a str."""
        self._check_known(span_id)

    def _check_known(self, span_id: Any) -> None:
        if not isinstance(span_id, str):
            raise InvalidInputError(f"span id must be a str, not {type(span_id).__name__}")
        prefix, digits = span_id[:1], span_id[1:]
        if prefix not in ("o", "d") or not digits.isdigit() or digits.startswith("0"):
            raise UnknownSpanError(
                f"{span_id!r} is not a span id (span ids look like o17 or d3)", span_id=span_id
            )
        count = self._state.n_obs if prefix == "o" else self._state.n_der
        if int(digits) > count:
            raise UnknownSpanError(
                f"{span_id} does not exist in session {self.name!r} at position {self.position} "
                f"({count} {'observed' if prefix == 'o' else 'derived'} spans so far)",
                span_id=span_id,
            )

    def _check_live(self, span_id: str) -> Span:
        self._check_known(span_id)
        span = self._state.live.get(span_id)
        if span is None:
            raise SpanNotLiveError(self._not_live_message(span_id), span_id=span_id)
        return span

    def _not_live_message(self, span_id: str, ev: Event | None = None) -> str:
        ev = ev if ev is not None else self._last_touch(span_id)
        why = ""
        if isinstance(ev, Pruned):
            why = f"pruned at position {ev.originator_version}; restore {span_id} to bring it back"
        elif isinstance(ev, Rewritten):
            why = f"rewritten into {ev.span_id} at position {ev.originator_version}"
        elif isinstance(ev, Expanded):
            why = f"expanded into its originals at position {ev.originator_version}"
        return f"{span_id} is not live in the buffer" + (f" ({why})" if why else "")

    def _check_position(self, n: Any) -> int:
        if isinstance(n, bool) or not isinstance(n, int):
            raise PositionOutOfRangeError(f"position must be an int, not {type(n).__name__}")
        if not 1 <= n <= self.position:
            raise PositionOutOfRangeError(
                f"position {n} is out of range: session {self.name!r} has positions 1..{self.position}",
                position=n,
            )
        return n

    def resolve_position(self, at: int | str | None) -> int:
        """A position, a mark label, or None (the head)."""
        if at is None:
            return self.position
        if isinstance(at, str):
            if at in self._state.marks:
                return self._state.marks[at]
            if at.lstrip("-").isdigit():
                at = int(at)
            else:
                raise PositionOutOfRangeError(f"no mark named {at!r} in session {self.name!r}")
        if isinstance(at, int) and not isinstance(at, bool) and at < 0:
            at = self.position + 1 + at  # -1 is the head, like Python indexing
        return self._check_position(at)

    # -- time travel, integrity ------------------------------------------------------------

    def at(self, n: int | str) -> SessionView:
        """The session exactly as it was after event ``n`` (a read-only view)."""
        view = self._at(n)
        view.grounding_cache = self.grounding_cache
        view.blame_finder = self.blame_finder
        return view

    def _at(self, n: int | str) -> SessionView:
        n = self.resolve_position(n)
        stored, pending = self._unsaved()
        if n == self.position:
            return SessionView(self._store, LogStore.copy_state(self._state), tuple(pending), checker=self.checker)
        if n <= stored:
            return SessionView(self._store, self._store.state_at(self.id, n), checker=self.checker)
        unsaved = tuple(pending[: n - stored])
        state = self._store.state_at(self.id, stored)
        for ev in unsaved:
            state = apply(state, ev, self._load)  # positions up to n read the same from the session
        return SessionView(self._store, state, unsaved, checker=self.checker)

    def rebuild(self) -> BufferState:
        """The buffer at this position rebuilt from the first event, ignoring snapshots."""
        stored, pending = self._unsaved()
        state = self._store.rebuild(self.id, stored)
        for ev in pending:
            state = apply(state, ev, self._load)
        return state

    def export(self, out: Any = None) -> list[str] | int:
        """The log as JSON lines (one object per event). With ``out`` (a path or a text stream) the
        lines are written there and their count returned."""
        from engine._store.transfer import export_lines, write_export

        if out is None:
            return list(export_lines(self))
        return write_export(self, out)

    def verify(self) -> VerifyResult:
        """Walk the hash chain from the first event to this position (the unsaved commands of an
        open ``batch()`` included)."""
        stored, pending = self._unsaved()
        return verify_chain(self._store, self.id, stored, pending)

    # -- read side (projections/) ------------------------------------------------------------

    def view(self, at: int | str | None = None) -> _Reader:
        """This session at ``at`` (a position, a mark, or None for now)."""
        n = self.resolve_position(at)
        return self if n == self.position else self.at(n)

    def audit(self, at: int | str | None = None):
        """Drift findings at a position: structural, grounding, merged events, refusals."""
        from projections.audit import audit

        return audit(self.view(at))

    def blame(self, text: str, at: int | str | None = None):
        """Where a piece of text in the buffer came from (and, if gone, what removed it)."""
        from projections.blame import blame

        return blame(self.view(at), text, find=self.blame_finder)

    def lineage(self, span_id: str, at: int | str | None = None):
        """What a span came from and what it became."""
        from projections.lineage import lineage

        return lineage(self.view(at), span_id)

    def diff(self, a: int | str, b: int | str | None = None):
        """Spans added, removed, rewritten or re-derived between positions a and b (default: now)."""
        from projections.diff import diff

        return diff(self, self.resolve_position(a), self.resolve_position(b))

    def timeline(self, at: int | str | None = None):
        """Per event: live span count and live tokens by provenance."""
        from projections.timeline import timeline

        return timeline(self.view(at))

    def render(self, format: str = "text", *, mark_derived: bool = True, at: int | str | None = None, ids: bool = False):
        """The buffer as the model sees it: plain text, OpenAI chat messages or Anthropic messages
        (``ids=True``: each span tagged with its id, for the model's context tools)."""
        from engine.render import render

        view = self.view(at)
        return render(view.spans(), format=format, mark_derived=mark_derived, reader=view, ids=ids)


def _needle(span_id: str) -> bytes:
    """How ``span_id`` appears inside any stored payload that names it (msgpack: a str header, then
    the bytes), as a field or an element of a tuple of ids."""
    return msgspec.msgpack.encode(span_id)


def _touches(ev: Event, span_id: str) -> bool:
    t = type(ev)
    if t is Pruned or t is Restored or t is Observed:
        return ev.span_id == span_id
    if t is Rewritten:
        return ev.span_id == span_id or span_id in ev.inputs
    if t is Expanded:
        return ev.span_id == span_id or span_id in ev.restored
    return False


class SessionView(_Reader):
    """A session as it was at one position. Read-only."""

    def __init__(
        self, store: LogStore, state: BufferState, unsaved: tuple[Event, ...] = (), *, checker: Checker | None = None
    ):
        self._store = store
        self.checker = checker
        self._state = state
        # events after the stored log (a view taken inside an open batch), and where they start
        self._pending_view = unsaved
        self._stored = state.version - len(unsaved)

    def _unsaved(self) -> tuple[int, Sequence[Event]]:
        return self._stored, self._pending_view

    def __repr__(self) -> str:
        return f"<SessionView {self.name!r} at {self.position}: {len(self._state.live)} live spans>"


class Session(_Reader):
    """One agent's context buffer and the log behind it. Obtain from ``Ledger.create_session`` or
    ``Ledger.session``; every command validates, then appends exactly one event."""

    def __init__(
        self, store: LogStore, counter: TokenCounter, state: BufferState, head: bytes, *, checker: Checker | None = None
    ):
        self._store = store
        self.counter = counter  # counts a text's tokens when observe() is not given them
        self.checker = checker
        self._stale = False
        self._state = state
        self._head = head
        self._pending: list[Event] = []
        self._payloads: list[bytes] = []  # the encoded bytes of each pending event
        self._batch_depth = 0
        self._happened: datetime | None = None  # the original time of the commands being issued
        self.bytes_since_snapshot = 0

    @classmethod
    def starting(
        cls,
        store: LogStore,
        counter: TokenCounter,
        state: BufferState,
        started: Event,
        payload: bytes,
        *,
        checker: Checker | None = None,
    ) -> Session:
        """A new session whose first event (its ``SessionStarted``, already folded into ``state``)
        is pending: the caller saves it with ``store.save``."""
        session = cls(store, counter, state, chain_hash(payload), checker=checker)
        session._pending.append(started)
        session._payloads.append(payload)
        return session

    @property
    def _state(self) -> BufferState:
        # After a failed write whose reload failed too (the store went away), the in-memory state
        # still holds the unsaved events: read the session back before anything builds on it.
        if self._stale:
            self._reload()
        return self._live_state

    @_state.setter
    def _state(self, state: BufferState) -> None:
        self._live_state = state

    def __repr__(self) -> str:
        state = self._live_state
        return f"<Session {state.name!r} at {state.version}: {len(state.live)} live spans>"

    # eventsourcing's aggregate protocol -----------------------------------------------------

    @property
    def version(self) -> int:
        return self._state.version

    def collect_events(self) -> list[Event]:
        return self.take_pending()[0]

    # writing ---------------------------------------------------------------------------------

    def _unsaved(self) -> tuple[int, Sequence[Event]]:
        return self._state.version - len(self._pending), self._pending

    def _emit(self, cls: type[Event], **fields: Any) -> Event:
        state = self._state
        happened = self._happened
        if happened is not None:
            fields["recorded"] = now()
        return self._append(cls(originator_version=state.version + 1, at=happened or now(), prev=self._head, **fields))

    def _append(self, ev: Event) -> Event:
        """Fold a new event into the state, chain it, and save it (now, or when the batch ends)."""
        payload = encode_event(ev)
        state = self._live_state
        _force_setattr(ev, "originator_id", state.session_id)
        self._live_state = apply(state, ev, self._load)
        self._head = chain_hash(payload)
        self._pending.append(ev)
        self._payloads.append(payload)
        self.bytes_since_snapshot += len(payload)
        if not self._batch_depth:
            self._flush()
        return ev

    def take_pending(self) -> tuple[list[Event], list[bytes]]:
        """The unsaved events and their encoded payloads (hashed as they are), handed to the store."""
        events, payloads = self._pending, self._payloads
        self._pending, self._payloads = [], []
        return events, payloads

    def _flush(self) -> None:
        if not self._pending:
            return
        try:
            self._store.save(self)
        except BaseException as e:
            self._pending, self._payloads = [], []
            self._stale = True
            if not isinstance(e, StoreUnavailableError):  # a vanished store: reload on next use
                with contextlib.suppress(LedgerError):
                    self._reload()
            raise

    def _reload(self) -> None:
        """Throw away unsaved state and read the session back from the store."""
        self._pending, self._payloads = [], []
        self._live_state, self._head = self._store.load(self._live_state.session_id)
        self._stale = False
        self.bytes_since_snapshot = 0

    def refresh(self) -> Session:
        """Catch up with events other writers appended since this session was loaded."""
        if self._pending:
            raise InvalidInputError("cannot refresh inside a batch with unsaved events")
        self._reload()
        return self

    @contextlib.contextmanager
    def batch(self, *, atomic: bool = False) -> Iterator[Session]:
        """Save every command issued inside the block in one transaction, when the block exits.

        Commands that returned were accepted; they are written when the block exits, even when it
        exits with an exception (a refused command inside it raised and wrote nothing but its refusal).
        ``atomic=True``: all or nothing -- a block that exits with an exception (an error, Ctrl-C)
        writes none of its events, and the session is read back as it was before the block."""
        self._batch_depth += 1
        done = False
        try:
            yield self
            done = True
        finally:
            self._batch_depth -= 1
            if not self._batch_depth:
                if done or not atomic:
                    self._flush()
                else:
                    try:
                        self._reload()
                    except Exception:  # the store is gone: read it back on next use
                        self._pending, self._payloads = [], []
                        self._stale = True

    @contextlib.contextmanager
    def happened_at(self, when: datetime | str | None) -> Iterator[Session]:
        """Commands issued inside the block record ``when`` as the time their events happened (an
        imported transcript's own time, an ISO 8601 string or an aware datetime); the time they are
        appended is kept in each event's ``recorded``. ``None`` leaves the time as it is."""
        happened = validate.moment(when) if when is not None else None
        outer, self._happened = self._happened, happened if happened is not None else self._happened
        try:
            yield self
        finally:
            self._happened = outer

    def _count(self, text: str, tokens: int | None) -> int:
        if tokens is None:
            return self.counter.count(text)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidInputError(f"tokens must be a non-negative int; got {tokens!r}")
        return tokens

    # commands --------------------------------------------------------------------------------

    def observe(
        self,
        text: str,
        *,
        role: str = "user",
        kind: str = "message",
        meta: dict[str, Any] | None = None,
        by: str = "",
        tokens: int | None = None,
    ) -> Span:
        """Record something that came from outside the model's own rewriting (a user turn, a tool
        result, a model reply as produced). Returns the new live span ``o<n>``."""
        # The hot path: the common valid shapes are recognised with cheap checks; anything else
        # goes through the full validators, which raise the typed errors (or accept it).
        if not (type(text) is str and text.isascii() and 0 < len(text) <= validate.MAX_TEXT_BYTES and not text.isspace()):
            validate.text(text)
        if role not in ROLES:  # a tuple: an unhashable role is simply not in it
            validate.role(role)
        if kind not in _OBSERVED_KINDS:
            validate.kind(kind, _OBSERVED_KINDS)
        meta = validate.meta(meta)
        if by.__class__ is not str or by:
            by = validate.optional_str(by, "by")
        if kind != "message" or role == "tool":
            validate.tool_shape(role, kind, meta)
        if tokens is None:
            tokens = self.counter.count(text)
        elif tokens.__class__ is not int or tokens < 0:
            tokens = self._count(text, tokens)
        state = self._state
        span_id = f"o{state.n_obs + 1}"
        happened = self._happened
        self._append(
            Observed(
                originator_version=state.version + 1, at=happened or now(), prev=self._head,
                span_id=span_id, text=text, role=role, kind=kind, meta=meta, tokens=tokens, by=by,
                recorded=None if happened is None else now(),
            )
        )
        return self._live_state.live[span_id]

    def prune(self, span_id: str, *, reason: str = "", by: str = "", meta: dict[str, Any] | None = None) -> None:
        """Remove a live span from the buffer. Always allowed; the original stays in the log.
        ``meta`` is about the edit (e.g. the tool call that made it), kept in the event."""
        span = self._check_live(span_id)
        reason = validate.optional_str(reason, "reason")
        by = validate.optional_str(by, "by")
        meta = validate.meta(meta)
        self._emit(Pruned, span_id=span_id, content_position=span.position, reason=reason, by=by, meta=meta)

    def rewrite(
        self,
        span_ids: Sequence[str],
        text: str,
        *,
        by: str = "",
        reason: str = "",
        role: str | None = None,
        meta: dict[str, Any] | None = None,
        gate: bool = False,
        tokens: int | None = None,
    ) -> Span:
        """Replace live observed generation-0 spans with one derived span of generation 1.

        A derived input is refused with ``RewritePolicyError`` (and the refusal is recorded), except
        in a permissive session, which records the violation and lets the generation grow."""
        ids = validate.span_ids(span_ids)
        validate.text(text)
        by = validate.optional_str(by, "by")
        reason = validate.optional_str(reason, "reason")
        meta = validate.meta(meta)
        if role is not None:
            validate.role(role)
        inputs = [self._check_live(i) for i in ids]
        offending = tuple(s.id for s in inputs if s.provenance is not Provenance.OBSERVED or s.generation)
        if offending and self._state.strict:
            message = (
                f"refusing to rewrite {', '.join(offending)}: "
                f"{'it is' if len(offending) == 1 else 'they are'} derived (generation "
                f"{max(self._state.live[i].generation for i in offending)}); rewriting a rewrite "
                "causes summary drift. Prune it, or rederive it from its original observed spans."
            )
            self._emit(
                RewriteRefused,
                command="rewrite",
                inputs=ids,
                text=text,
                offending=offending,
                reason=message,
                by=by,
                meta=meta,
            )
            raise RewritePolicyError(message, span_id=offending[0], position=self.position)
        sources: list[str] = []
        source_positions: list[int] = []
        for s in inputs:
            if s.provenance is Provenance.OBSERVED:
                sources.append(s.id)
                source_positions.append(s.position)
            else:
                sources.extend(s.sources)
                source_positions.extend(s.source_positions)
        if gate:
            if offending:  # a derived input (permissive): its originals come back from the log
                originals = [span_from_event(self._load(p)) for p in source_positions]
            else:  # live observed inputs are the originals, as observed
                originals = inputs
            self._gate("rewrite", ids, text, originals, by, meta)
        generation = max(s.generation for s in inputs) + 1
        span_id = derived_id(self._state.n_der + 1)
        self._emit(
            Rewritten,
            span_id=span_id,
            text=text,
            inputs=ids,
            input_positions=tuple(s.position for s in inputs),
            sources=tuple(sources),
            source_positions=tuple(source_positions),
            generation=generation,
            violation=bool(offending),
            role=role or _derived_role(inputs),
            kind="summary",
            tokens=self._count(text, tokens),
            meta=meta,
            by=by,
            reason=reason,
        )
        return self._state.live[span_id]

    def rederive(
        self,
        span_id: str,
        *,
        text: str | None = None,
        rewriter: Callable[[list[Span]], str] | Any = None,
        instruction: str | None = None,
        by: str = "",
        reason: str = "",
        gate: bool = False,
        tokens: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Span:
        """Rebuild a live derived span's text from its ORIGINAL observed spans, read from the log
        (never from the derived text). The span keeps its id and stays generation 1; ``meta`` (about
        this edit) is added to the span's meta."""
        span = self._check_live(span_id)
        if span.provenance is not Provenance.DERIVED:
            raise SpanStateError(
                f"{span_id} is an observed span; only derived spans are re-derived (rewrite it instead)",
                span_id=span_id,
            )
        if (text is None) == (rewriter is None):
            raise InvalidInputError("rederive needs exactly one of text= or rewriter=", span_id=span_id)
        by = validate.optional_str(by, "by")
        reason = validate.optional_str(reason, "reason")
        meta = validate.meta(meta)
        originals = [span_from_event(self._load(p)) for p in span.source_positions]
        if rewriter is not None:
            text = call_rewriter(rewriter, originals, instruction, failing=f"while re-deriving {span_id}", span_id=span_id)
            by = by or str(getattr(rewriter, "name", "") or "")
        else:
            validate.text(text)
        if gate:
            self._gate("rederive", (span_id,), text, originals, by, meta)
        self._emit(
            Rederived,
            span_id=span_id,
            text=text,
            sources=span.sources,
            source_positions=span.source_positions,
            generation=1,
            role=span.role,
            kind=span.kind,
            tokens=self._count(text, tokens),
            meta={**span.meta, **meta} if meta else span.meta,
            by=by,
            reason=reason,
        )
        return self._state.live[span_id]

    def restore(self, span_id: str, *, reason: str = "", by: str = "", meta: dict[str, Any] | None = None) -> Span:
        """Bring a pruned span (observed or derived) back into the buffer, in its place."""
        self._check_known(span_id)
        reason = validate.optional_str(reason, "reason")
        by = validate.optional_str(by, "by")
        meta = validate.meta(meta)
        if span_id in self._state.live:
            raise SpanStateError(f"{span_id} is already live; nothing to restore", span_id=span_id)
        last = self._last_touch(span_id)
        if not isinstance(last, Pruned):
            raise SpanStateError(
                self._not_live_message(span_id, last).replace("is not live in the buffer", "cannot be restored"),
                span_id=span_id,
            )
        self._emit(Restored, span_id=span_id, content_position=last.content_position, reason=reason, by=by, meta=meta)
        return self._state.live[span_id]

    def expand(self, span_id: str, *, reason: str = "", by: str = "", meta: dict[str, Any] | None = None) -> list[Span]:
        """Replace a live derived span by its original observed spans, read back from the log."""
        span = self._check_live(span_id)
        if span.provenance is not Provenance.DERIVED:
            raise SpanStateError(f"{span_id} is an observed span; only derived spans expand", span_id=span_id)
        reason = validate.optional_str(reason, "reason")
        by = validate.optional_str(by, "by")
        meta = validate.meta(meta)
        clash = [s for s in span.sources if s in self._state.live]
        if clash:
            raise SpanStateError(
                f"cannot expand {span_id}: its source {clash[0]} is live already", span_id=span_id
            )
        self._emit(
            Expanded,
            span_id=span_id,
            restored=span.sources,
            restored_positions=span.source_positions,
            reason=reason,
            by=by,
            meta=meta,
        )
        return [self._state.live[s] for s in span.sources]

    def mark(self, label: str, *, by: str = "", reason: str = "") -> int:
        """Label the current position ("cycle-9") for navigation; returns the mark's position."""
        validate.label(label)
        self._emit(
            Marked,
            label=label,
            by=validate.optional_str(by, "by"),
            reason=validate.optional_str(reason, "reason"),
        )
        return self.position

    def _gate(
        self, command: str, inputs: Sequence[str], text: str, originals: list[Span], by: str, meta: dict[str, Any] | None = None
    ) -> None:
        """The opt-in grounding gate: refuse (and record) a rewrite that adds unsupported specifics
        (or, with a model-based checker configured, any error-level drift it finds)."""
        from projections.grounding.checker import gate_errors
        from projections.grounding.evidence import source_of

        findings = gate_errors(self.checker, text, [source_of(s) for s in originals])
        if not findings:
            return
        from engine.errors import GroundingError

        values = ", ".join(repr(f["value"]) for f in findings[:5])
        if all(f.get("kind") == "unsupported-specific" for f in findings):
            message = (
                f"refusing to {command} {', '.join(inputs)}: the text states {values} which "
                f"{'is' if len(findings) == 1 else 'are'} in none of its {len(originals)} source observations"
            )
        else:
            checker = findings[0].get("checker", "the checker")
            message = (
                f"refusing to {command} {', '.join(inputs)}: {checker} finds it unsupported by its "
                f"{len(originals)} source observations: " + "; ".join(f["message"] for f in findings[:3])
            )
        self._emit(
            RewriteRefused,
            command=command,
            inputs=tuple(inputs),
            text=text,
            findings=tuple(findings),
            reason=message,
            by=by,
            meta=meta or {},
        )
        raise GroundingError(message, findings=tuple(findings), position=self.position)


def _derived_role(inputs: list[Span]) -> str:
    """A summary speaks as the user unless every input came from one non-tool role."""
    roles = {s.role for s in inputs}
    if len(roles) == 1 and next(iter(roles)) in ("user", "assistant", "system"):
        return next(iter(roles))
    return "user"

