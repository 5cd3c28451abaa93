"""ctxledger's write side: an event-sourced compaction engine for LLM context windows.

    from engine import Ledger
    ledger = Ledger.open("sqlite:///ctxledger.db")
    s = ledger.create_session("agent-42")
    a = s.observe("GET /health -> 503 from billing-api", role="tool", kind="tool_result",
                  meta={"tool_call_id": "c1"})
"""

from engine.errors import (
    ConcurrencyError,
    CorruptLogError,
    DuplicateSessionError,
    GroundingError,
    ImportFormatError,
    InvalidInputError,
    LedgerError,
    NotALedgerError,
    PositionOutOfRangeError,
    RewriterError,
    RewritePolicyError,
    SessionError,
    SpanError,
    SpanNotLiveError,
    SpanStateError,
    StorageError,
    StoreUnavailableError,
    UnknownSessionError,
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
    SessionStarted,
)
from engine.ledger import Ledger, SessionInfo
from engine.session import Session, SessionView, VerifyResult
from engine.spans import Provenance, Span
from engine.tokens import BPECounter, EstimateCounter, TokenCounter, counter_for
from engine.render import render
from engine.rewriters import AnthropicRewriter, ExtractiveRewriter, OpenAIRewriter, Rewriter
from engine.compaction import (
    Action,
    Compactor,
    ElideToolOutputs,
    Plan,
    PruneDerived,
    PruneOldest,
    RewriteOldest,
    ShrinkDerived,
    StepResult,
    policy,
)
from engine.replay import replay

__all__ = [
    "Ledger",
    "Session",
    "SessionView",
    "SessionInfo",
    "Span",
    "Provenance",
    "VerifyResult",
    "TokenCounter",
    "BPECounter",
    "EstimateCounter",
    "counter_for",
    # rendering, compaction, rewriters, replay
    "render",
    "Compactor",
    "Plan",
    "Action",
    "StepResult",
    "ElideToolOutputs",
    "RewriteOldest",
    "ShrinkDerived",
    "PruneDerived",
    "PruneOldest",
    "policy",
    "Rewriter",
    "ExtractiveRewriter",
    "OpenAIRewriter",
    "AnthropicRewriter",
    "replay",
    # events
    "Event",
    "SessionStarted",
    "Observed",
    "Pruned",
    "Rewritten",
    "Rederived",
    "Restored",
    "Expanded",
    "RewriteRefused",
    "Marked",
    # errors
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
    "PositionOutOfRangeError",
    "ConcurrencyError",
    "RewriterError",
    "ImportFormatError",
    "StorageError",
    "NotALedgerError",
    "CorruptLogError",
    "StoreUnavailableError",
]
