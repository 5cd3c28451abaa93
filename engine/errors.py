"""Every error ctxledger raises, under one root.

    LedgerError                      anything ctxledger refuses or cannot do
    ├── InvalidInputError            bad argument: wrong type, empty/oversized/non-text text, bad role
    ├── SessionError
    │   ├── UnknownSessionError      no session of that name or id
    │   └── DuplicateSessionError    the name is taken
    ├── SpanError
    │   ├── UnknownSpanError         no such span id in this session
    │   ├── SpanNotLiveError         the span exists but is not in the live buffer
    │   └── SpanStateError           the span is in the wrong state for the command (e.g. restore of a live span)
    ├── RewritePolicyError           a rewrite that would break the drift invariant (recorded as RewriteRefused)
    │   └── GroundingError           the grounding gate found unsupported specifics (also recorded)
    ├── PositionOutOfRangeError      time travel outside 1..position
    ├── ConcurrencyError             another writer appended to the session first; nothing of ours was written
    ├── RewriterError                the rewriter failed (timeout, API error, bad output); nothing was written
    ├── CheckerError                 a configured drift checker failed (judge endpoint, model files, bad reply)
    ├── ImportFormatError            an import file is malformed or tampered with; nothing was written
    └── StorageError                 the store cannot be used
        ├── NotALedgerError          the database belongs to something else
        ├── CorruptLogError          stored bytes that do not decode
        └── StoreUnavailableError    cannot connect / the server went away

Every error names what was refused and why; the log is unchanged by a refused command, except that a
refused rewrite is itself recorded as a ``RewriteRefused`` event (forensics wants attempted drift).
"""

from __future__ import annotations

__all__ = [
    "LedgerError",
    "InvalidInputError",
    "SessionError",
    "UnknownSessionError",
    "DuplicateSessionError",
    "SpanError",
    "UnknownSpanError",
    "SpanNotLiveError",
    "SpanStateError",
    "RewritePolicyError",
    "GroundingError",
    "CheckerError",
    "PositionOutOfRangeError",
    "ConcurrencyError",
    "RewriterError",
    "ImportFormatError",
    "StorageError",
    "NotALedgerError",
    "CorruptLogError",
    "StoreUnavailableError",
]


class LedgerError(Exception):
    """Root of every error ctxledger raises."""

    def __init__(self, message: str, *, span_id: str | None = None, position: int | None = None):
        super().__init__(message)
        self.message = message
        self.span_id = span_id
        self.position = position


class InvalidInputError(LedgerError, ValueError):
    pass


class SessionError(LedgerError):
    pass


class UnknownSessionError(SessionError, LookupError):
    pass


class DuplicateSessionError(SessionError):
    pass


class SpanError(LedgerError):
    pass


class UnknownSpanError(SpanError, LookupError):
    pass


class SpanNotLiveError(SpanError):
    pass


class SpanStateError(SpanError):
    pass


class RewritePolicyError(LedgerError, RuntimeError):
    """A rewrite that would let the model summarize its own output (or otherwise break the rules)."""


class GroundingError(RewritePolicyError):
    """The grounding gate refused a rewrite whose text carries specifics absent from its sources."""

    def __init__(self, message: str, *, findings: tuple = (), **kw):
        super().__init__(message, **kw)
        self.findings = findings


class PositionOutOfRangeError(LedgerError, IndexError):
    pass


class CheckerError(LedgerError):
    """A configured drift checker could not check: its endpoint failed, its model files are missing
    or malformed, or its reply did not parse. Nothing is written because of it."""


class ConcurrencyError(LedgerError):
    pass


class RewriterError(LedgerError):
    pass


class ImportFormatError(LedgerError, ValueError):
    def __init__(self, message: str, *, line: int | None = None, **kw):
        super().__init__(message, **kw)
        self.line = line


class StorageError(LedgerError):
    pass


class NotALedgerError(StorageError):
    pass


class CorruptLogError(StorageError):
    pass


class StoreUnavailableError(StorageError):
    pass
