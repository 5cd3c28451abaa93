"""The read side: pure folds over a session's events. A projection never writes events."""

# The package loads lazily: the store folds buffers with ``projections.buffer`` and must not pull in
# the drift checker, the audit and the other folds behind it (a hook that only records would load
# them for nothing). Names resolve on first use (PEP 562) and are then cached in the module.
import importlib as _importlib
import sys as _sys
from types import ModuleType as _ModuleType

# The one export list: each public name under the module that defines it. ``__all__`` is derived from
# it; tests/architecture/test_exports.py checks each resolves to a projections object.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "projections.buffer": ("BufferState", "apply", "project", "span_from_event"),
    "projections.audit": ("AuditReport", "Finding", "SpanCoverage", "audit"),
    "projections.blame": ("BlameHit", "blame"),
    "projections.diff": ("Diff", "DiffEntry", "diff"),
    "projections.grounding": ("GroundingResult", "check", "gate_findings"),
    "projections.lineage": ("Lineage", "LineageNode", "LineageStep", "lineage"),
    "projections.lost": ("LostCategory", "LostItem", "LostReport", "lost"),
    "projections.timeline": ("Timeline", "TimelinePoint", "timeline"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
# the functions named like the module that defines them (``projections.audit`` is the function)
_NAMED_LIKE_MODULE = frozenset(name for module, names in _EXPORTS.items() for name in names
                               if module == f"{__name__}.{name}")

__all__ = sorted(_MODULE_OF)


class _Package(_ModuleType):
    """The import system binds each loaded submodule on its package; where the package exports a
    function of the submodule's own name, the name stays the function (as when it was eager)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _NAMED_LIKE_MODULE and isinstance(value, _ModuleType) and value.__name__ == f"{__name__}.{name}":
            value = getattr(value, name, value)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
