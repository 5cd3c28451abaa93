"""ctxledger's write side: an event-sourced compaction engine for LLM context windows.

    from engine import Ledger
    ledger = Ledger.open("sqlite:///ctxledger.db")
    s = ledger.create_session("agent-42")
    a = s.observe("GET /health -> 503 from billing-api", role="tool", kind="tool_result",
                  meta={"tool_call_id": "c1"})
"""

# The package loads lazily: ``import engine.events`` (as the read side does) must not pull in the
# store, the session and the SDKs behind them, and ``from engine import Ledger`` loads only what
# Ledger needs. Names resolve on first use (PEP 562) and are then cached in the module.
import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ConcurrencyError": "engine.errors",
    "CorruptLogError": "engine.errors",
    "DuplicateSessionError": "engine.errors",
    "GroundingError": "engine.errors",
    "CheckerError": "engine.errors",
    "ImportFormatError": "engine.errors",
    "InvalidInputError": "engine.errors",
    "LedgerError": "engine.errors",
    "NotALedgerError": "engine.errors",
    "PositionOutOfRangeError": "engine.errors",
    "RewriterError": "engine.errors",
    "RewritePolicyError": "engine.errors",
    "SessionError": "engine.errors",
    "SpanError": "engine.errors",
    "SpanNotLiveError": "engine.errors",
    "SpanStateError": "engine.errors",
    "StorageError": "engine.errors",
    "StoreUnavailableError": "engine.errors",
    "UnknownSessionError": "engine.errors",
    "UnknownSpanError": "engine.errors",
    "Event": "engine.events",
    "Expanded": "engine.events",
    "Marked": "engine.events",
    "Observed": "engine.events",
    "Pruned": "engine.events",
    "Rederived": "engine.events",
    "Restored": "engine.events",
    "RewriteRefused": "engine.events",
    "Rewritten": "engine.events",
    "SessionStarted": "engine.events",
    "Ledger": "engine.ledger",
    "SessionInfo": "engine.ledger",
    "Session": "engine.session",
    "SessionView": "engine.session",
    "VerifyResult": "engine.chain",
    "Provenance": "engine.spans",
    "Span": "engine.spans",
    "BPECounter": "engine.tokens",
    "EstimateCounter": "engine.tokens",
    "TokenCounter": "engine.tokens",
    "counter_for": "engine.tokens",
    "render": "engine.render",
    "AnthropicRewriter": "engine.rewriters",
    "ExtractiveRewriter": "engine.rewriters",
    "OpenAIRewriter": "engine.rewriters",
    "Rewriter": "engine.rewriters",
    "Action": "engine.compaction",
    "Compactor": "engine.compaction",
    "ElideToolOutputs": "engine.compaction",
    "Plan": "engine.compaction",
    "PruneDerived": "engine.compaction",
    "PruneOldest": "engine.compaction",
    "RewriteOldest": "engine.compaction",
    "ShrinkDerived": "engine.compaction",
    "StepResult": "engine.compaction",
    "policy": "engine.compaction",
    "replay": "engine.replay",
}

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


# ``render`` and ``replay`` are also the names of their submodules: importing a submodule binds the
# package attribute to the module, which would hide a lazily resolved function of the same name. Both
# are light (vocabulary and projections only), so they are bound here, after their modules load.
from engine.render import render  # noqa: E402
from engine.replay import replay  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from engine.errors import (
        ConcurrencyError,
        CorruptLogError,
        DuplicateSessionError,
        GroundingError,
        CheckerError,
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
