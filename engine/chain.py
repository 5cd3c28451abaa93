"""The fast walk of a session's hash chain: the stored events decoded in order, a page at a time,
each checked against the one before it. ``verify`` and the audit both read the log through it;
when it stops early, ``Ledger._verify`` explains where and why."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from engine.codec import CHAIN_DIGEST_SIZE, SESSION_DECODERS, encode_payload
from engine.events import Event, SessionStarted

if TYPE_CHECKING:
    from engine.ledger import Ledger

__all__ = ["ChainWalk"]

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

    def __init__(self, ledger: Ledger, session_id: UUID, stop: int | None, pending: Iterable[Event] = ()):
        self.ledger = ledger
        self.session_id = session_id
        self.stop = stop
        self.pending = pending
        self.ok = True
        self.last = 0
        self.head = b""

    def pages(self) -> Iterator[list[Event]]:
        from engine.ledger import LAST_POSITION

        stop = self.stop if self.stop is not None else LAST_POSITION
        try:
            for oid, rows in self.ledger._pages(self.session_id, 1, stop, page=PAGE):
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
        mapper = self.ledger._app.mapper
        if mapper.cipher is None and mapper.compressor is None:
            payloads = [data for _, _, data in rows]
        else:
            payloads = []
            for p, t, d in rows:
                try:
                    payloads.append(mapper.plaintext(StoredEvent(oid, p, t, d)))
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
        blake2b = hashlib.blake2b
        digests = [blake2b(payload, digest_size=CHAIN_DIGEST_SIZE).digest() for payload in payloads[: len(events)]]
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
            self.head = hashlib.blake2b(payload, digest_size=CHAIN_DIGEST_SIZE).digest()
            self.last += 1
            verified.append(ev)
        return verified
