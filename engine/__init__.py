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
#
# The one export list: each public name under the module that defines it. ``__all__`` is derived from
# it; tests/architecture/test_exports.py checks that every name resolves to an object of that module and that the
# package exposes nothing public besides.
import importlib as _importlib

_EXPORTS: dict[str, tuple[str, ...]] = {
    "engine.ledger": ("Ledger", "SessionInfo"),
    "engine.session": ("Session", "SessionView"),
    "engine.verification": ("VerifyResult",),
    "engine.spans": ("Span", "Provenance"),
    "engine.tokens": ("TokenCounter", "BPECounter", "EstimateCounter", "counter_for"),
    # rendering, compaction, rewriters, replay
    "engine.render": ("render",),
    "engine.compaction": (
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
    ),
    "engine.rewriters": ("Rewriter", "ExtractiveRewriter", "OpenAIRewriter", "AnthropicRewriter"),
    "engine.replay": ("replay",),
    "engine.events": (
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
    ),
    "engine.errors": (
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
    ),
    "engine.extras": ("MissingExtraError",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = list(_MODULE_OF)


# ``render`` and ``replay`` are also the names of their submodules: importing a submodule binds the
# package attribute to the module, which would hide a lazily resolved function of the same name. Both
# are light (vocabulary and projections only), so they are bound here, after their modules load.
from engine.render import render  # noqa: E402
from engine.replay import replay  # noqa: E402


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
