"""The rules of the lexical checker: each one principle, one short code, one check of one signature.

Every rule holds to the checker's contract:

- **error**: a literal the summary states (a quotation, a number with its unit, an id, a hash, a
  path, a time) that appears in nothing the summarizer saw, or a claim its sources contradict (the
  last outcome of what is claimed done is a failure; a fact the sources give to something else);
- **warning**: a claim about something that appears nowhere in the sources (an activity never
  mentioned, an instruction the user never gave, a name never used): positive evidence that it
  was invented, not the mere absence of a confirming line;
- **info**: what cannot be verified either way (a count the summarizer computed, an outcome that
  was never printed, a sentence-initial word), near-quotes, dropped specifics.

A faithful summary gets no error and no warning. A rule is a function ``check(evidence) ->
list[finding]`` registered with ``@rule(code, kinds, principle)``; ``RULES`` lists them in the
order the checker runs them. Each rule's cases (grounded and ungrounded, from real text where
there is any) are in ``cases/<code>.jsonl`` beside this module, run by the test suite and scored
by ``benchmarks/quality.py --rule CODE``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from projections.grounding.evidence import Evidence

__all__ = ["Rule", "RULES", "rule", "finding", "GroundingFinding", "CASES", "SEVERITIES"]

SEVERITIES = ("error", "warning", "info")
CASES = Path(__file__).resolve().parent / "cases"


class GroundingFinding(TypedDict, total=False):
    """One finding about a derived text: plain JSON (it is stored inside ``RewriteRefused`` events
    and crosses the checker protocol as is). ``kind``, ``severity``, ``value`` and ``message`` are
    always there; ``rule`` names the rule (``checker`` the checker, added by the checker)."""

    kind: str
    severity: str
    value: str
    message: str
    category: str
    offset: int
    rule: str
    checker: str
    near: list[str]
    support: float
    entities: list[str]
    source_indexes: list[int]


def finding(rule_code: str, kind: str, severity: str, value: str, message: str, *, offset: int = 0,
            category: str = "", **extra: Any) -> GroundingFinding:
    """The one way a rule reports: a ``GroundingFinding`` with every required field."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, not {severity!r}")
    out: GroundingFinding = {"kind": kind, "category": category, "value": value, "severity": severity,
                             "message": message, "offset": offset, "rule": rule_code}
    out.update(extra)  # type: ignore[typeddict-item]
    return out


@dataclass(frozen=True)
class Rule:
    code: str  # short and stable: what ``--rule`` and a finding's ``rule`` say
    kinds: tuple[str, ...]  # the finding kinds it reports
    principle: str  # the one sentence it enforces
    check: Callable[[Evidence], list[GroundingFinding]]
    claims: bool = True  # False: runs even when claim checks are off (``check(with_claims=False)``)

    def cases(self) -> list[dict]:
        """Its cases file: one JSON object a line (``summary``, ``sources``, ``expect``)."""
        import json

        path = CASES / f"{self.code}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


RULES: dict[str, Rule] = {}


def rule(code: str, kinds: tuple[str, ...], principle: str, *, claims: bool = True):
    """Register ``check`` as the rule ``code``."""

    def register(check: Callable[[Evidence], list[GroundingFinding]]) -> Callable[[Evidence], list[GroundingFinding]]:
        if code in RULES:
            raise ValueError(f"a rule {code!r} is already registered")
        RULES[code] = Rule(code, kinds, principle, check, claims)
        return check

    return register
