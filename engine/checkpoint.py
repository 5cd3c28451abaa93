"""Signed checkpoints: evidence about a session's history that does not depend on the database.

The hash chain catches a change to any event that has a successor. It cannot catch a changed or
deleted *last* event, and it cannot catch somebody with write access to the store who changes an
event and recomputes every hash after it. A checkpoint closes that gap: it is the statement
"session S had N events, the chain hash of event N was H and of event N-1 was P", signed with an
Ed25519 key that the operator keeps away from the store. Anyone holding the public key can check
the statement, and check a store or an export file against it, without trusting the database.

A checkpoint file holds one JSON object per line (append as many as you like)::

    {"format": "ctxledger-checkpoint/1", "session": "agent-42", "session_id": "…", "position": 120,
     "head": "<32 hex>", "prev": "<32 hex>", "signed_at": "2026-11-12T09:30:00Z",
     "key_id": "<16 hex>", "signature": "<base64 of 64 bytes>"}

The signature covers exactly these ASCII bytes (lines joined by ``\\n``, no trailing newline), so a
third party can check it with any Ed25519 implementation, e.g. openssl (``statement()`` builds them)::

    ctxledger-checkpoint/1
    session_id=<uuid>
    position=<decimal>
    head=<hex>
    prev=<hex, empty at position 1>
    signed_at=<the signed_at field, verbatim>

The session's name is bound through its id (a session id is the UUIDv5 of its name): a checkpoint
whose name does not give its id is refused.

What a checkpoint proves: events 1..N are exactly the ones that existed when it was signed. Events
after the newest checkpoint are protected by the chain alone.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from engine.errors import CorruptLogError, ImportFormatError, InvalidInputError, UnknownSessionError
from engine.verification import VerifyResult

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from engine.ledger import Ledger
    from engine.reading import LogReader

__all__ = [
    "FORMAT",
    "Checkpoint",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "key_id",
    "sign",
    "signature_ok",
    "check_session",
    "check_store",
    "check_export",
    "read_checkpoints",
    "append_checkpoint",
]

FORMAT = "ctxledger-checkpoint/1"


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A signed statement of a session's chain head at one position."""

    format: str = FORMAT
    session: str
    session_id: UUID
    position: int
    head: str
    prev: str = ""
    signed_at: str
    key_id: str
    signature: str

    def statement(self) -> bytes:
        """The exact bytes the signature covers."""
        return "\n".join(
            [
                FORMAT,
                f"session_id={self.session_id}",
                f"position={self.position}",
                f"head={self.head}",
                f"prev={self.prev}",
                f"signed_at={self.signed_at}",
            ]
        ).encode("utf-8")

    def describe(self) -> str:
        return f"checkpoint of {self.session!r} at position {self.position} signed {self.signed_at} by key {self.key_id}"


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Checkpoint)


# -- keys ------------------------------------------------------------------------------------------


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:  # pragma: no cover - the crypto extra is missing
        raise InvalidInputError(
            "signed checkpoints need the 'cryptography' package: pip install 'ctxledger[crypto]'"
        ) from None
    return ed25519, serialization, InvalidSignature


def generate_keypair(private_path: str | os.PathLike, public_path: str | os.PathLike | None = None) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair as PEM files (the private one readable by its owner only).
    Refuses to overwrite an existing file. Returns (private path, public path, key id)."""
    ed25519, serialization, _ = _crypto()
    private_path = Path(private_path)
    public_path = Path(public_path) if public_path is not None else private_path.with_suffix(".pub")
    if private_path == public_path:
        raise InvalidInputError("the private and public key files must be different files")
    for p in (private_path, public_path):
        if p.exists():
            raise InvalidInputError(f"{p} exists already; refusing to overwrite a key")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(private_pem)
        public_path.write_bytes(public_pem)
    except OSError as e:
        raise InvalidInputError(f"cannot write the key pair: {e.strerror}: {e.filename}") from None
    return private_path, public_path, key_id(key.public_key())


def _read_key_bytes(source: Any, what: str) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            return Path(source).read_bytes()
        except OSError as e:
            raise InvalidInputError(f"cannot read the {what} file {source}: {e.strerror}") from None
    raise InvalidInputError(f"a {what} is a path or PEM bytes, not {type(source).__name__}")


def load_private_key(source: Any) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file (path) or PEM bytes."""
    ed25519, serialization, _ = _crypto()
    if isinstance(source, ed25519.Ed25519PrivateKey):
        return source
    data = _read_key_bytes(source, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise InvalidInputError(
            "the private key is not an unencrypted PEM private key (make one with `ctxledger keygen`)"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InvalidInputError(f"the private key is a {type(key).__name__}, not an Ed25519 key")
    return key


def load_public_key(source: Any) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file (path) or PEM bytes."""
    ed25519, serialization, _ = _crypto()
    if isinstance(source, ed25519.Ed25519PublicKey):
        return source
    data = _read_key_bytes(source, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise InvalidInputError("the public key is not a PEM public key (`ctxledger keygen` writes one)") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InvalidInputError(f"the public key is a {type(key).__name__}, not an Ed25519 key")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    """A short fingerprint of a public key: BLAKE2b-64 of its 32 raw bytes, in hex."""
    _, serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


# -- signing ---------------------------------------------------------------------------------------


def _utc_text(at: datetime | None) -> str:
    at = (at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def sign(session: LogReader, private_key: Any, *, at: datetime | None = None) -> Checkpoint:
    """Sign ``session``'s chain head at its position. The chain is verified first: a broken
    chain is never signed (``CorruptLogError`` names the first bad position)."""
    key = load_private_key(private_key)
    result = session.verify()
    if not result.ok:
        raise CorruptLogError(
            f"refusing to sign a checkpoint of {session.name!r}: {result.reason}",
            position=result.first_bad_position,
        )
    position = result.position
    prev = session.event(position).prev.hex() if position > 1 else ""
    unsigned = Checkpoint(
        session=session.name,
        session_id=session.id,
        position=position,
        head=result.head,
        prev=prev,
        signed_at=_utc_text(at),
        key_id=key_id(key.public_key()),
        signature="",
    )
    signature = base64.b64encode(key.sign(unsigned.statement())).decode("ascii")
    return msgspec.structs.replace(unsigned, signature=signature)


def signature_ok(checkpoint: Checkpoint, public_key: Any) -> bool:
    """Whether the checkpoint's signature is valid for ``public_key``."""
    from engine.ledger import session_uuid

    _, _, InvalidSignature = _crypto()
    key = load_public_key(public_key)
    if not isinstance(checkpoint.session, str) or session_uuid(checkpoint.session) != checkpoint.session_id:
        return False  # the name is bound to the signed id: it cannot be swapped
    try:
        signature = base64.b64decode(checkpoint.signature, validate=True)
    except ValueError:
        return False
    try:
        key.verify(signature, checkpoint.statement())
    except InvalidSignature:
        return False
    return True


# -- files -----------------------------------------------------------------------------------------


def append_checkpoint(checkpoint: Checkpoint, path: str | os.PathLike) -> None:
    """Append one checkpoint line to a checkpoint file (created if missing), flushed to disk."""
    line = _encoder.encode(checkpoint) + b"\n"
    try:
        with open(path, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise InvalidInputError(f"cannot write the checkpoint file {path}: {e.strerror}") from None


def dumps(checkpoint: Checkpoint) -> str:
    return _encoder.encode(checkpoint).decode()


def read_checkpoints(source: Any) -> list[Checkpoint]:
    """Every checkpoint in a file (a path, bytes, or an iterable of lines); malformed input raises
    ``InvalidInputError`` naming the line."""
    if isinstance(source, (str, os.PathLike)):
        try:
            data = Path(source).read_bytes()
        except OSError as e:
            raise InvalidInputError(f"cannot read the checkpoint file {source}: {e.strerror}") from None
        source = data
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInputError("the checkpoint file is not UTF-8 text") from None
        lines: Iterable[Any] = source.splitlines()
    else:
        lines = source
    out = []
    for number, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if not isinstance(line, str):
            raise InvalidInputError(f"checkpoint line {number} is a {type(line).__name__}, not text")
        if not line.strip():
            continue
        try:
            cp = _decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise InvalidInputError(f"checkpoint line {number} is malformed: {e}") from None
        if cp.format != FORMAT:
            raise InvalidInputError(f"checkpoint line {number} has format {cp.format!r}; expected {FORMAT!r}")
        if cp.position < 1:
            raise InvalidInputError(f"checkpoint line {number} names position {cp.position}")
        out.append(cp)
    if not out:
        raise InvalidInputError("the checkpoint file holds no checkpoints")
    return out


# -- checking --------------------------------------------------------------------------------------


def _fail(position: int, first_bad: int | None, reason: str, head: str = "") -> VerifyResult:
    return VerifyResult(ok=False, position=position, head=head, first_bad_position=first_bad, reason=reason)


def _compare(
    checkpoints: list[Checkpoint],
    public_key: Any,
    length: int,
    head: str,
    hash_at: Callable[[int], str],
    prev_at: Callable[[int], str],
) -> VerifyResult:
    """Compare a history whose chain already verified (``length`` events, ``hash_at(p)`` the chain
    hash of event p) with signed checkpoints of it."""
    key = load_public_key(public_key)
    kid = key_id(key)
    vouched = 0
    for cp in sorted(checkpoints, key=lambda c: c.position):
        if not signature_ok(cp, key):
            who = f"signed by key {cp.key_id}, checked with key {kid}" if cp.key_id != kid else f"key {kid}"
            return _fail(
                length, None,
                f"the {cp.describe()} has an invalid signature ({who}): the checkpoint was altered "
                "or was not made with this key; it proves nothing",
                head,
            )
        if cp.position > length:
            return _fail(
                length, length + 1,
                f"the log ends at position {length}, but the {cp.describe()} covers {cp.position} events: "
                + (f"event {cp.position} was deleted" if cp.position == length + 1 else f"events {length + 1}..{cp.position} were deleted"),
                head,
            )
        if hash_at(cp.position) == cp.head:
            vouched = cp.position
            continue
        if prev_at(cp.position) == cp.prev:
            return _fail(
                length, cp.position,
                f"the event at position {cp.position} is not the one in the {cp.describe()}: it was changed "
                f"(the events before it match)",
                head,
            )
        return _fail(
            length, vouched + 1,
            f"the history up to position {cp.position} differs from the {cp.describe()} and the chain was "
            f"recomputed to hide it: an event in positions {vouched + 1}..{cp.position - 1} was changed"
            + (f" (positions 1..{vouched} match an earlier checkpoint)" if vouched else ""),
            head,
        )
    return VerifyResult(
        ok=True, position=length, head=head,
        reason=f"chain intact; {len(checkpoints)} signed checkpoint(s) match, vouching for positions 1..{vouched}",
    )


def check_session(session: LogReader, checkpoints: Iterable[Checkpoint], public_key: Any) -> VerifyResult:
    """Walk ``session``'s chain, then hold it against every checkpoint of it in ``checkpoints``.
    Fails (naming the first bad position) if the chain breaks, a signature is invalid, signed
    events are missing, or an event differs from what was signed."""
    mine = [cp for cp in checkpoints if cp.session_id == session.id]
    if not mine:
        raise InvalidInputError(f"no checkpoint of session {session.name!r} was given")
    chain = session.verify()
    if not chain.ok:
        return chain
    length = chain.position

    def hash_at(p: int) -> str:
        return chain.head if p == length else session.event(p + 1).prev.hex()

    def prev_at(p: int) -> str:
        return session.event(p).prev.hex() if p > 1 else ""

    return _compare(mine, public_key, length, chain.head, hash_at, prev_at)


def check_store(ledger: Ledger, checkpoints: Iterable[Checkpoint], public_key: Any) -> list[tuple[str, VerifyResult]]:
    """Check every session named in ``checkpoints`` against the store. A session that was signed
    but is gone from the store fails (at position 1)."""
    by_session: dict[UUID, list[Checkpoint]] = {}
    for cp in checkpoints:
        by_session.setdefault(cp.session_id, []).append(cp)
    out = []
    for session_id, cps in by_session.items():
        name = cps[-1].session
        try:
            session = ledger.session(session_id)
        except UnknownSessionError:
            latest = max(cps, key=lambda c: c.position)
            out.append((name, _fail(0, 1, f"the session is missing from the store, but the {latest.describe()} exists")))
            continue
        out.append((session.name, check_session(session, cps, public_key)))
    return out


def check_export(source: Any, checkpoints: Iterable[Checkpoint], public_key: Any) -> list[tuple[str, VerifyResult]]:
    """Check an export file (``ctxledger export``) against checkpoints: no database involved.
    The file's own chain is verified first, then every checkpoint of a session it holds."""
    from engine._store.transfer import check_chain, parse_export

    cps = list(checkpoints)
    try:
        parsed = parse_export(source)
    except ImportFormatError as e:
        return [("<export>", _fail(0, e.position or e.line, f"the export file is malformed: {e.message}"))]
    hashes: dict[UUID, dict[int, str]] = {}
    prevs: dict[UUID, dict[int, str]] = {}
    names: dict[UUID, str] = {}
    # A fork's file carries its parent's events too; positions are per-file (1..n), each line
    # naming the session it belongs to. Checkpoints of a fork cover the shared prefix.
    target = parsed[-1][1].session_id
    for _, line, ev in parsed:
        names.setdefault(line.session_id, line.session)
        hashes.setdefault(target, {})[line.position] = line.hash
        prevs.setdefault(target, {})[line.position] = ev.prev.hex()
    names[target] = parsed[-1][1].session
    try:
        check_chain(parsed)
    except ImportFormatError as e:
        return [(names[target], _fail(0, e.position or e.line, f"the export's chain is broken: {e.message}"))]
    length = len(parsed)
    mine = [cp for cp in cps if cp.session_id == target]
    if not mine:
        raise InvalidInputError(f"no checkpoint of session {names[target]!r} (the export's session) was given")
    h, p = hashes[target], prevs[target]
    return [(names[target], _compare(mine, public_key, length, h[length], lambda q: h[q], lambda q: p[q] if q > 1 else ""))]
