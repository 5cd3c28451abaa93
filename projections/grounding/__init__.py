"""Grounding: is a derived text supported by what its summarizer saw?

The lexical checker is a set of rules (``projections.grounding.registry``), each one principle with
a short code, run over one ``Evidence`` (the derived text, its sources, the indexes they share):

| code | finding kind | principle |
| --- | --- | --- |
| ``literal`` | ``unsupported-specific``, ``near-quote`` | a literal the summary states is in something the summarizer saw |
| ``merged`` | ``merged-events`` | events the sources keep apart are not told as one |
| ``instruction`` | ``invented-instruction`` | what the user asked for is in the user's own words |
| ``completion`` | ``unsupported-completion`` | work claimed done is not contradicted, and happened at all |
| ``plan`` | ``contradicts-own-plan`` | work claimed done is not what the summary's own plan still lists |
| ``status`` | ``status-flip`` | a status is not the opposite of what the sources say |
| ``pairing`` | ``swapped-pairing`` | a fact is not one the sources give to something else |

Severities follow one contract (``registry``): error for a literal nothing states or a claim the
sources contradict, warning for a claim about something that appears nowhere, information for what
cannot be verified. ``check(text, sources)`` runs every rule and measures coverage;
``gate_findings(text, sources)`` is what the write-side grounding gate (``rewrite(..., gate=True)``)
refuses on: error-level unsupported literals. Findings are plain JSON dicts (``GroundingFinding``),
so they can be stored inside a ``RewriteRefused`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from projections.grounding import completions as _completions  # noqa: F401  (registers its rule)
from projections.grounding import instructions as _instructions  # noqa: F401
from projections.grounding import literals as _literals  # noqa: F401
from projections.grounding import merged as _merged  # noqa: F401
from projections.grounding import own_plan as _own_plan  # noqa: F401
from projections.grounding import pairings as _pairings  # noqa: F401
from projections.grounding import statuses as _statuses  # noqa: F401
from projections.grounding.completions import UNSUPPORTED_COMPLETION
from projections.grounding.coverage import coverage
from projections.grounding.evidence import Evidence, Source, as_sources
from projections.grounding.instructions import INVENTED_INSTRUCTION
from projections.grounding.literals import NEAR_QUOTE, UNSUPPORTED, unsupported
from projections.grounding.merged import MERGED, merged_events
from projections.grounding.own_plan import CONTRADICTS_OWN_PLAN
from projections.grounding.pairings import SWAPPED_PAIRING
from projections.grounding.registry import RULES, GroundingFinding, Rule, finding, rule
from projections.grounding.specifics import SourceIndex, Specific, extract, grams, tokens
from projections.grounding.statuses import STATUS_FLIP

__all__ = [
    "GroundingResult",
    "GroundingFinding",
    "Evidence",
    "Source",
    "Rule",
    "RULES",
    "rule",
    "finding",
    "check",
    "gate_findings",
    "unsupported",
    "merged_events",
    "coverage",
    "as_sources",
    "extract",
    "SourceIndex",
    "Specific",
    "tokens",
    "grams",
    "UNSUPPORTED",
    "MERGED",
    "NEAR_QUOTE",
    "INVENTED_INSTRUCTION",
    "UNSUPPORTED_COMPLETION",
    "STATUS_FLIP",
    "SWAPPED_PAIRING",
    "CLAIM_KINDS",
    "CONTRADICTS_OWN_PLAN",
    "DRIFT_KINDS",
]

CLAIM_KINDS = (INVENTED_INSTRUCTION, UNSUPPORTED_COMPLETION, CONTRADICTS_OWN_PLAN, STATUS_FLIP, SWAPPED_PAIRING)
DRIFT_KINDS = (UNSUPPORTED, MERGED, *CLAIM_KINDS)  # the finding kinds that mean a summary drifted


@dataclass(slots=True)
class GroundingResult:
    """Everything ``check`` found for one derived text."""

    findings: list[GroundingFinding] = field(default_factory=list)
    specifics: int = 0  # specifics in the derived text
    source_specifics: int = 0  # distinct strong specifics in the sources
    dropped: list[str] = field(default_factory=list)  # of those, the ones the derived text lost

    @property
    def coverage(self) -> float:
        if not self.source_specifics:
            return 1.0
        return 1 - len(self.dropped) / self.source_specifics


def check(
    text: str,
    sources: Sequence[str | Source],
    *,
    index: SourceIndex | None = None,
    with_coverage: bool = True,
    with_claims: bool = True,
    lowercase_vocabulary: frozenset[str] | None = None,
    rules: Sequence[str] | None = None,
) -> GroundingResult:
    """Check a derived text against what its summarizer saw: the sources' texts, or ``Source``s
    (text, role, harness tag, tool call id) so that claims about what the user asked for are held to
    the user's words. ``rules``: the codes to run (default: all; ``with_claims=False``: only the
    rules that check literals and merged events)."""
    ev = Evidence(text, sources, index=index, lowercase_vocabulary=lowercase_vocabulary)
    findings: list[GroundingFinding] = []
    for code, r in RULES.items():
        if rules is not None and code not in rules:
            continue
        if not with_claims and r.claims:
            continue
        findings.extend(r.check(ev))
    result = GroundingResult(findings=findings, specifics=len(ev.found))
    if with_coverage:
        srcs = ev.sources
        if not any(s.harness for s in srcs):
            kept = ev.index
        elif ev.index.read_from([s.text for s in srcs]):
            kept = ev.index.subset(i for i, s in enumerate(srcs) if not s.harness)
        else:  # an index of other texts was given
            kept = SourceIndex.build(
                [s.text for s in srcs if not s.harness], [p for s, p in zip(srcs, ev.index.per_text) if not s.harness],
                [t for s, t in zip(srcs, ev.index.tok_lists) if not s.harness],
            )
        result.source_specifics, result.dropped = coverage(text, kept, ev.found)
    return result


def gate_findings(text: str, sources: Sequence[str]) -> list[GroundingFinding]:
    """What the write-time grounding gate refuses on: error-level unsupported literals. An empty
    list means the rewrite may be written."""
    found = extract(text)
    return [f for f in unsupported(text, SourceIndex.build(sources), found=found) if f["severity"] == "error"]
