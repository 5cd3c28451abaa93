"""How events become bytes and back: msgspec msgpack behind an eventsourcing ``Mapper``.

Topics are short and stable (``ctxledger:Observed``), independent of module paths, so moving code
never breaks decoding of stored events. The payload never holds the session id (it is a column of
its own); it does hold the position, so a row moved to another position no longer verifies.
The hash chain is computed over the plaintext payload bytes exactly as stored.
"""

from __future__ import annotations

import hashlib
import zlib
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import zstandard
from eventsourcing.persistence import Mapper, StoredEvent

from engine.errors import CorruptLogError
from engine.events import EVENT_TYPES, RewriteRefused
from engine.validate import MAX_META_DEPTH, nesting
from projections.buffer import BufferState

__all__ = [
    "SessionSnapshot",
    "LedgerMark",
    "TOPICS",
    "encode_payload",
    "decode_payload",
    "chain_hash",
    "EventMapper",
    "READABLE_DEPTH",
    "readable",
    "first_unreadable",
]

TOPIC_PREFIX = "ctxledger:"
SNAPSHOT_TOPIC = TOPIC_PREFIX + "Snapshot"


def _one_line(e: BaseException) -> str:
    """A dependency's error text fit for a one-line message (control characters escaped: the
    text can quote field names taken from hostile input)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e))
MARK_TOPIC = TOPIC_PREFIX + "LedgerCreated"


class SessionSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """The live buffer projection at one position (a snapshot is never part of the hash chain)."""

    originator_id: UUID | None = None
    originator_version: int = 0
    timestamp: datetime
    state: BufferState

    @classmethod
    def take(cls, aggregate: Any) -> "SessionSnapshot":
        from engine.events import now

        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=now(),
            state=aggregate.state,
        )


class LedgerMark(msgspec.Struct, frozen=True, kw_only=True):
    """The first record of every ctxledger store: tells our databases from anybody else's."""

    originator_id: UUID | None = None
    originator_version: int = 1
    format: int = 1
    created: datetime


TOPICS: dict[type, str] = {cls: TOPIC_PREFIX + name for name, cls in EVENT_TYPES.items()}
TOPICS[SessionSnapshot] = SNAPSHOT_TOPIC
TOPICS[LedgerMark] = MARK_TOPIC
_BY_TOPIC = {topic: cls for cls, topic in TOPICS.items()}
_DECODERS = {topic: msgspec.msgpack.Decoder(cls) for topic, cls in _BY_TOPIC.items()}
_ENCODER = msgspec.msgpack.Encoder()
encode_event = _ENCODER.encode  # encode_payload without the call: the write path's hot loop
_FAST_TOPICS = frozenset(TOPIC_PREFIX + name for name in EVENT_TYPES)
SESSION_DECODERS = {topic: d for topic, d in _DECODERS.items() if topic in _FAST_TOPICS}  # session events only


def encode_payload(obj: Any) -> bytes:
    """The stored bytes of an event whose ``originator_id`` is None."""
    return _ENCODER.encode(obj)


def decode_payload(topic: str, payload: bytes, originator_id: Any = None, position: int | None = None):
    try:
        decoder = _DECODERS[topic]
    except KeyError:
        raise CorruptLogError(
            f"unknown event type {topic!r} at position {position}", position=position
        ) from None
    try:
        obj = decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise CorruptLogError(
            f"event at position {position} does not decode as {topic!r}: {_one_line(e)}", position=position
        ) from None
    except RecursionError:
        raise CorruptLogError(too_deep_message(position), position=position) from None
    if originator_id is not None:
        msgspec.structs.force_setattr(obj, "originator_id", originator_id)
    return obj


def too_deep_message(position: int | None) -> str:
    return (f"event at position {position} nests deeper than {READABLE_DEPTH} levels: too deep for the "
            "readers of the log to decode (ctxledger refuses such input when it is written)")


# An event nests one level (the event itself) above its meta, which validation bounds.
READABLE_DEPTH = MAX_META_DEPTH + 1
# Bytes a payload may hold besides its text without a closer look: this few bytes cannot nest
# deep enough to trouble a reader, even as fields the event types do not know (which a decoder
# skips, recursively, without showing them).
_SMALL_REST = 400
# The msgpack bytes that open a map or an array: a payload with no more of them than READABLE_DEPTH
# cannot nest deeper, whatever they stand for (they also occur inside strings and numbers).
_NOT_CONTAINERS = bytes(b for b in range(256) if not (0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF))
_NESTED = (dict, list, tuple)


def readable(payload: bytes, event: Any) -> bool:
    """Whether every reader can decode this event, at any stack depth it runs at: what the event
    shows nests at most READABLE_DEPTH deep, and what a decoder skips (fields the event types do
    not know) is small or shallow too. Deterministic: the answer never depends on the caller.

    Only meta (and a refusal's findings) can nest; typed fields are flat. So the common event, flat
    meta and a payload that is text plus a few hundred bytes, costs a glance; the others a count of
    container bytes, and the few with many of them an exact walk."""
    meta = getattr(event, "meta", None)
    if meta and any(v.__class__ in _NESTED for v in meta.values()) or event.__class__ is RewriteRefused:
        pass
    elif len(payload) - len(getattr(event, "text", "")) <= _SMALL_REST:  # chars <= bytes: a safe bound
        return True
    if len(payload.translate(None, _NOT_CONTAINERS)) <= READABLE_DEPTH:
        return True
    if nesting(event, READABLE_DEPTH) > READABLE_DEPTH:
        return False
    if payload == _ENCODER.encode(msgspec.structs.replace(event, originator_id=None)):
        return True  # the payload is exactly the event: nothing hidden in it
    try:  # fields the event types do not know: how deep do they go?
        whole = msgspec.msgpack.decode(payload)
    except RecursionError:
        return False
    except (msgspec.DecodeError, ValueError):
        return False
    return nesting(whole, READABLE_DEPTH) <= READABLE_DEPTH


def first_unreadable(payloads: list[bytes], events: list[Any]) -> int | None:
    """The index of the first event of a page that not every reader can decode (see ``readable``)."""
    small, nested, refused = _SMALL_REST, _NESTED, RewriteRefused
    for i, ev in enumerate(events):
        meta = getattr(ev, "meta", None)
        if meta:
            for v in meta.values():
                if v.__class__ in nested:
                    break
            else:
                if ev.__class__ is not refused and len(payloads[i]) - len(getattr(ev, "text", "")) <= small:
                    continue
        elif ev.__class__ is not refused and len(payloads[i]) - len(getattr(ev, "text", "")) <= small:
            continue
        if not readable(payloads[i], ev):
            return i
    return None


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compress_snapshot(payload: bytes) -> bytes:
    """Snapshots are the only large records: zstd level 1 (3x faster than zlib level 1 here, and
    smaller). Snapshots written before zstd are zlib streams; ``decompress_snapshot`` reads both."""
    return zstandard.ZstdCompressor(level=1).compress(payload)


def decompress_snapshot(data: bytes) -> bytes:
    if data[:4] == _ZSTD_MAGIC:
        return zstandard.ZstdDecompressor().decompress(data)
    return zlib.decompress(data)


CHAIN_DIGEST_SIZE = 16


def chain_hash(payload: bytes) -> bytes:
    """What the next event's ``prev`` must hold: a 128-bit BLAKE2b digest of this payload."""
    return hashlib.blake2b(payload, digest_size=CHAIN_DIGEST_SIZE).digest()


class EventMapper(Mapper):
    """eventsourcing Mapper for msgspec events, with optional compression/cipher from the factory.

    Snapshots are compressed even without a compressor: they are the only large records.
    ``prepared`` holds payloads the Session already encoded to hash them (keyed by ``id(event)``
    while ``Application.save`` writes them), so each event is encoded once.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.prepared: dict[int, bytes] = {}

    def plaintext(self, stored: StoredEvent) -> bytes:
        data = stored.state
        if self.cipher:
            data = self.cipher.decrypt(data)
        if self.compressor:
            data = self.compressor.decompress(data)
        return data

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        topic = TOPICS[type(domain_event)]
        originator_id = domain_event.originator_id
        payload = self.prepared.get(id(domain_event))
        if payload is None:
            payload = encode_payload(msgspec.structs.replace(domain_event, originator_id=None))
        return StoredEvent(
            originator_id=originator_id,
            originator_version=domain_event.originator_version,
            topic=topic,
            state=self.seal(topic, payload),
        )

    def seal(self, topic: str, payload: bytes) -> bytes:
        """The stored bytes of an encoded payload: compressed if a snapshot, then through the
        store's compressor and cipher, if any."""
        if topic == SNAPSHOT_TOPIC:
            payload = compress_snapshot(payload)
        if self.compressor:
            payload = self.compressor.compress(payload)
        if self.cipher:
            payload = self.cipher.encrypt(payload)
        return payload

    def decode_rows(self, originator_id: UUID, rows: list[tuple[int, str, bytes]]) -> list[Any]:
        """Decode a page of (position, topic, bytes) rows of one session: the bulk path, same checks
        as ``to_domain_event`` with less per-row overhead."""
        if self.cipher or self.compressor or not all(row[1] in _FAST_TOPICS for row in rows):
            return [self.to_domain_event(StoredEvent(originator_id, p, t, d)) for p, t, d in rows]
        try:
            events = [_DECODERS[topic].decode(data) for _, topic, data in rows]
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            for position, topic, data in rows:  # find, and name, the row that does not decode
                decode_payload(topic, data, None, position)
            raise  # pragma: no cover - the loop above raised
        force = msgspec.structs.force_setattr
        for ev in events:
            force(ev, "originator_id", originator_id)
        return events

    def to_domain_event(self, stored: StoredEvent) -> Any:
        try:
            data = stored.state
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
            if stored.topic == SNAPSHOT_TOPIC:
                data = decompress_snapshot(data)
        except Exception as e:  # a cipher or compressor failure means the bytes are not ours
            raise CorruptLogError(
                f"event at position {stored.originator_version} cannot be read "
                f"(wrong key or corrupt data): {type(e).__name__}",
                position=stored.originator_version,
            ) from None
        originator_id = stored.originator_id
        if isinstance(originator_id, str):
            originator_id = UUID(originator_id)
        return decode_payload(stored.topic, data, originator_id, stored.originator_version)


