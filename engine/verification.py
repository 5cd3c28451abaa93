"""What ``verify`` returns: the result of walking a session's hash chain (the walk itself is
``engine._store.chain``)."""

from __future__ import annotations

import msgspec

__all__ = ["VerifyResult", "TAMPERED", "UNDECODABLE"]

TAMPERED, UNDECODABLE = "tampered", "undecodable"


class VerifyResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of walking a session's hash chain."""

    ok: bool
    position: int  # events checked
    head: str = ""  # hex hash of the last event: anchor it elsewhere to detect truncation
    first_bad_position: int | None = None
    reason: str = ""
    # Why it is not ok: "tampered" (the stored log contradicts what was written) or "undecodable"
    # (the bytes are the ones written, as far as the chain shows, but cannot be decoded here).
    cause: str = ""

    def __bool__(self) -> bool:
        return self.ok
