"""Verifying a session's hash chain.

``ChainWalk`` is the fast walk: the stored events decoded in order, a page at a time, each checked
against the one before it; ``verify`` and the audit both read the log through it. When it stops
early, ``explain_chain`` walks the stored log again event by event to say where and why."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from engine._store.codec import SESSION_DECODERS, chain_hash, decode_payload, encode_payload, first_unreadable, readable, too_deep_message
from engine.errors import CorruptLogError, LedgerError
from engine.events import Event, SessionStarted
from engine.verification import TAMPERED, UNDECODABLE, VerifyResult
from engine._store.log_store import LAST_POSITION, LogStore, error_message, storage_error

__all__ = ["ChainWalk", "verify_chain", "explain_chain"]

PAGE = 500  # rows read, decoded and hashed at a time: small enough to stay in the CPU's caches

# Session events only: anything else in a session's stream (a snapshot, the ledger mark) is tampering.
_DECODERS = SESSION_DECODERS


class ChainWalk:
    """Decode the stored events 1..stop (every stored one when ``stop`` is None) once, checking on
    the way what ``verify`` checks: contiguous positions, decodable session events written for their
    position, one SessionStarted first (or a fork's, right after its fork position), and each
    ``prev`` the hash of the stored bytes before it. ``pending``: events accepted but not stored yet
    (an open ``batch()``), walked after the stored ones.

    ``pages()`` yields the verified events a page at a time (a page is decoded and hashed in bulk).
    When a check fails it yields what it verified before the failure and stops, with ``ok`` False;
    ``last`` is the last verified position and ``head`` its chain hash."""

    def __init__(self, store: LogStore, session_id: UUID, stop: int | None, pending: Iterable[Event] = ()):
        self.store = store
        self.session_id = session_id
        self.stop = stop
        self.pending = pending
        self.ok = True
        self.last = 0
        self.head = b""

    def pages(self) -> Iterator[list[Event]]:
        stop = self.stop if self.stop is not None else LAST_POSITION
        try:
            for oid, rows in self.store.pages(self.session_id, 1, stop, page=PAGE):
                verified = self._verify_page(oid, rows)
                if verified:
                    yield verified
                if not self.ok:
                    return
            pending = self._verify_pending(self.pending)
            if pending:
                yield pending
        except Exception:  # unreadable rows or a store that went away: verify() says what happened
            self.ok = False
            return
        if self.stop is not None and self.last < self.stop:
            self.ok = False

    def run(self) -> ChainWalk:
        """Walk to the end without keeping the events."""
        for _ in self.pages():
            pass
        return self

    def _verify_page(self, oid: Any, rows: list[tuple[int, str, bytes]]) -> list[Event]:
        if self.store.transparent:
            payloads = [data for _, _, data in rows]
        else:
            payloads = []
            for p, t, d in rows:
                try:
                    payloads.append(self.store.plaintext(StoredEvent(oid, p, t, d)))
                except Exception:  # bytes the key does not open: keep what precedes them
                    self.ok = False
                    break
        try:
            events = [_DECODERS[topic].decode(payload) for (_, topic, _), payload in zip(rows, payloads)]
        except Exception:  # an unknown topic or bytes that do not decode: keep what precedes them
            events = []
            for (_, topic, _), payload in zip(rows, payloads):
                try:
                    events.append(_DECODERS[topic].decode(payload))
                except Exception:
                    self.ok = False
                    break
        deep = first_unreadable(payloads, events)
        if deep is not None:  # decoded here, but not by every reader: stop before it
            del events[deep:]
            self.ok = False
        digests = [chain_hash(payload) for payload in payloads[: len(events)]]
        verified: list[Event] = []
        prev, expected = self.head, self.last + 1
        for (position, _, _), ev, digest in zip(rows, events, digests):
            if position != expected or ev.originator_version != position or ev.prev != prev:
                self.ok = False
                break
            if type(ev) is SessionStarted:
                msgspec.structs.force_setattr(ev, "originator_id", oid)
                if position != 1 and not (ev.forked_from is not None and ev.fork_position == position - 1):
                    self.ok = False
                    break
            elif position == 1:
                self.ok = False
                break
            verified.append(ev)
            prev = digest
            expected += 1
        self.head, self.last = prev, expected - 1
        return verified

    def _verify_pending(self, pending: Iterable[Event]) -> list[Event]:
        verified: list[Event] = []
        for ev in pending:
            if ev.originator_version != self.last + 1 or ev.prev != self.head:
                self.ok = False
                break
            payload = encode_payload(msgspec.structs.replace(ev, originator_id=None))
            self.head = chain_hash(payload)
            self.last += 1
            verified.append(ev)
        return verified


def verify_chain(store: LogStore, session_id: UUID, stop: int | None, pending: Sequence[Event] = ()) -> VerifyResult:
    """Walk the chain (``engine._store.chain.ChainWalk``, the fast path) to ``stop`` and on through the
    ``pending`` events of an open batch; when it stops early, walk the stored log again event by
    event to say where and why (``explain_chain``)."""
    from engine._store.chain import ChainWalk

    walk = ChainWalk(store, session_id, stop, pending=pending).run()
    if walk.ok and walk.last > 0:
        return VerifyResult(ok=True, position=walk.last, head=walk.head.hex())
    if pending and stop is not None and walk.last >= stop:  # the stored log is sound
        return VerifyResult(
            ok=False, position=walk.last, first_bad_position=walk.last + 1, cause=TAMPERED,
            reason=f"the unsaved event at position {walk.last + 1} does not chain to the event before it",
        )
    return explain_chain(store, session_id, stop)


def explain_chain(store: LogStore, session_id: UUID, stop: int | None) -> VerifyResult:
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

    def fail(bad: int, reason: str, cause: str = TAMPERED) -> VerifyResult:
        return VerifyResult(ok=False, position=checked, first_bad_position=bad, reason=reason, cause=cause)

    def read(row: StoredEvent) -> tuple[bytes, Any]:
        payload = store.plaintext(row)
        ev = decode_payload(row.topic, payload, None, row.originator_version)
        if not readable(payload, ev):
            raise CorruptLogError(too_deep_message(row.originator_version), position=row.originator_version)
        return payload, ev

    def cannot_read(row: StoredEvent, rows: Iterator[StoredEvent], e: Exception) -> VerifyResult:
        """An event that does not decode is tampering, unless it decodes but nests deeper than the
        readers allow and the chain does not contradict its bytes (the event after it chains to
        them, or it is the last): an older ctxledger accepted such input."""
        position = row.originator_version
        why = error_message(e)
        if not why.startswith(f"event at position {position} "):
            why = f"event at position {position} cannot be read: {why}"
        if why != too_deep_message(position):
            return fail(position, why)
        payload = store.plaintext(row)
        nxt = successor = None
        with contextlib.suppress(Exception):
            nxt = next(rows, None)
            if nxt is not None and nxt.originator_version == position + 1:
                successor = read(nxt)[1]
        if successor is not None and successor.prev == chain_hash(payload):
            return fail(position, f"{why}; its bytes are the ones written (the event after it chains to them)",
                        UNDECODABLE)
        if nxt is None:
            return fail(position, f"{why}; it is the last event (nothing after it vouches for its bytes)",
                        UNDECODABLE)
        return fail(position, f"{why}, and the event after it does not chain to it")

    try:
        rows = store.raw_events(session_id, stop)
        for row in rows:
            position = row.originator_version
            if position != expected:
                bad = expected if position > expected else position
                return fail(bad, f"position {expected} is missing (next stored position is {position})")
            try:
                payload, ev = read(row)
            except Exception as e:
                return cannot_read(row, rows, e)
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
        raise storage_error(e, "cannot read the log") from None
    if stop is not None and checked < stop:
        return fail(checked + 1, f"the log ends at position {checked}; expected {stop} events")
    return VerifyResult(ok=True, position=checked, head=prev.hex())
