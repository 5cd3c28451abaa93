"""Drift checkers: what judges whether a derived text is supported by its original sources.

A checker is anything with a ``name`` and ``check(summary, sources) -> list[dict]`` (the
``Checker`` protocol): ``sources`` are ``Source``s (text and role) of the summary's ORIGINAL
observations, and each finding is a dict with ``kind``, ``severity`` (error / warning / info),
``message`` and ``value``. The audit, the write-side grounding gate, blame, the report and the
fleet view run whichever checker the ledger is configured with, and every finding names the
checker that produced it.

``LexicalChecker`` (the default) is deterministic, offline and fast: the rules of
``projections.grounding`` (``RULES``). Model-based
checkers (an LLM judge over any OpenAI-compatible endpoint, a local NLI cross-encoder) live in
``engine.checkers`` and plug in through the same protocol.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from projections.grounding import GroundingResult, check, gate_findings
from projections.grounding.evidence import Source, as_sources

__all__ = ["Checker", "LexicalChecker", "rules_version", "LEXICAL", "Source", "as_sources", "run_checker", "gate_errors"]


@runtime_checkable
class Checker(Protocol):
    name: str

    def check(self, summary: str, sources: Sequence[Source]) -> list[dict]: ...


def _code_hash() -> str:
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


_RULES_VERSION = _code_hash()  # hashed as the package is imported: the code this process runs


def rules_version() -> str:
    """A hash of the code of ``projections.grounding`` (every rule and what they share): any change
    to a rule changes it, so results kept under an older version are never read back."""
    return _RULES_VERSION


class LexicalChecker:
    """The default: specifics, merged events, quotes and claims, by rules (no model, no network)."""

    name = "lexical"

    @property
    def version(self) -> str:
        """What identifies its results (``engine.grounding_cache`` keys them by it)."""
        return rules_version()

    def check(self, summary: str, sources: Sequence[Source]) -> list[dict]:
        return self.result(summary, sources, with_coverage=False).findings

    def result(self, summary: str, sources: Sequence[str | Source], *, with_coverage: bool = True) -> GroundingResult:
        """The full grounding result (coverage of the sources' specifics included)."""
        result = check(summary, as_sources(sources), with_coverage=with_coverage)
        for f in result.findings:
            f["checker"] = self.name
        return result

    def gate(self, summary: str, sources: Sequence[str | Source]) -> list[dict]:
        """What the write-time gate refuses on: specifics the sources never state."""
        return [dict(f, checker=self.name) for f in gate_findings(summary, [s.text for s in as_sources(sources)])]

    def __repr__(self) -> str:
        return "LexicalChecker()"


LEXICAL = LexicalChecker()


def run_checker(checker: Checker | None, summary: str, sources: Sequence[str | Source]) -> GroundingResult:
    """``checker``'s findings for one summary as a ``GroundingResult`` (coverage is the lexical
    measure whichever checker judges: it counts specifics, which needs no model)."""
    if checker is None or isinstance(checker, LexicalChecker):
        return (checker or LEXICAL).result(summary, sources)
    srcs = as_sources(sources)
    coverage = check(summary, srcs, with_claims=False)
    findings = [dict(f, checker=f.get("checker") or checker.name) for f in checker.check(summary, srcs)]
    return GroundingResult(
        findings=findings, specifics=coverage.specifics, source_specifics=coverage.source_specifics, dropped=coverage.dropped
    )


def gate_errors(checker: Checker | None, summary: str, sources: Sequence[str | Source]) -> list[dict]:
    """What the gate refuses on: the lexical checker's unsupported specifics, or any error-level
    drift finding of another checker."""
    if checker is None or isinstance(checker, LexicalChecker):
        return (checker or LEXICAL).gate(summary, sources)
    return [
        dict(f, checker=f.get("checker") or checker.name)
        for f in checker.check(summary, as_sources(sources))
        if f.get("severity") == "error"
    ]
