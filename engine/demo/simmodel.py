"""A simulated summarizing model that drifts the way the seed describes.

``DriftingModel`` is a ``Rewriter`` (``rewrite(spans, *, instruction=None, max_tokens=None)``). It
reads perfectly — it recognizes every ground-truth fact stated in an observation it is given — and
then makes the three mistakes the seed observed, at configurable rates, with its own seeded
``random.Random`` (the same seed and the same calls give the same text):

- **drop**: a fact it read does not make it into the summary (``drop`` per fact per pass);
- **merge**: two distinct events of the same kind in different services or files are collapsed
  into one ("the API failure: billing-api and auth-service returned HTTP 503 at 13:58"), keeping
  only the first one's specifics (``merge`` per adjacent pair per pass);
- **invent**: it states a specific that no observation contains ("migration 0047 completed at
  10:57"), chosen to fit what it read (``invent`` per call).

And it trusts itself: when a span it is handed is one of its own earlier summaries it reads every
line back as established truth. Invented and merged lines are kept verbatim on every later pass
(they have become the story), while the genuine facts in it go through ``drop`` again. That is
the whole mechanism of summary drift; nothing else in the demo is rigged.

The model's ``ledger`` remembers each line it ever wrote and what it was (a fact, a merge, an
invention), so the study can score a buffer against the ground truth.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.demo.workload import MERGEABLE, Fact, Workload, clock
from engine.spans import Span, ordinal

__all__ = ["Claim", "DriftingModel", "SUMMARY_HEADER"]

SUMMARY_HEADER = "Summary of earlier turns (state block):"
# Prose without specifics: the grounding gate judges the claims, not the framing.
_PROSE = "the agent's earlier requests, tool calls and results on the checkout platform; what matters:"
_INVENT_WEIGHT = {"migration": 6, "api_failure": 2, "deploy": 1, "file_edit": 1}
_GIST = {
    "get_logs": "read the recent log lines; routine traffic apart from what is listed above",
    "run_sql": "looked at invoice rows; nothing unusual in them",
    "edit_file": "change applied and saved",
    "deploy": "rollout steps ran through canary and full traffic",
    "run_migration": "migration launched",
    "check_status": "status lines read",
}


@dataclass(frozen=True)
class Claim:
    """One line of a summary."""

    text: str
    origin: str  # "fact" | "merged" | "invented" | "unknown"
    kind: str  # the fact kind it is about
    facts: tuple[str, ...] = ()  # ground-truth facts it states (fact: 1; merged: 2 or more)
    subjects: tuple[str, ...] = ()
    cycle: int = 0
    time: str = ""
    detail: dict = field(default_factory=dict, compare=False, hash=False)


class DriftingModel:
    """The simulated model. ``drop``, ``merge`` and ``invent`` are probabilities in [0, 1]."""

    def __init__(
        self,
        workload: Workload,
        *,
        seed: int = 7,
        drop: float = 0.10,
        merge: float = 0.15,
        invent: float = 0.20,
        name: str = "sim-model",
    ):
        for what, v in (("drop", drop), ("merge", merge), ("invent", invent)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{what} must be a probability in [0, 1]; got {v!r}")
        self.workload = workload
        self.rng = random.Random(f"sim-model:{seed}")
        self.drop, self.merge, self.invent = float(drop), float(merge), float(invent)
        self.name = name
        self.ledger: dict[str, Claim] = {}  # every line it ever wrote -> what it was
        self.calls = 0
        self.drops = 0
        self.merges = 0
        self.inventions: list[Claim] = []
        self._used_times: set[str] = set()
        # span id -> the workload turn it records, when the session holds more than the workload
        # (the model-driven run records the agent loop's own messages too); None: o<n> is turn n
        self.turn_of: dict[str, int] | None = None

    def __repr__(self) -> str:
        return f"DriftingModel(drop={self.drop}, merge={self.merge}, invent={self.invent})"

    # -- the Rewriter protocol ------------------------------------------------------------------

    def rewrite(self, spans: Sequence[Span], *, instruction: str | None = None, max_tokens: int | None = None) -> str:
        self.calls += 1
        claims = self._read(spans)
        claims = self._drop(claims)
        claims = self._merge(claims)
        invented = self._invent(claims) if self.rng.random() < self.invent else None
        if invented is not None:
            claims.append(invented)
        claims, context = self._fit(claims, self._context(spans), max_tokens)
        for c in claims:
            self.ledger.setdefault(c.text, c)
        return self._write(spans, claims, context)

    __call__ = rewrite

    # -- reading --------------------------------------------------------------------------------

    def _read(self, spans: Sequence[Span]) -> list[Claim]:
        out: list[Claim] = []
        seen: set[str] = set()
        for s in spans:
            if s.derived:
                # Its own earlier summary: every line is read back as established truth.
                for line in s.text.splitlines():
                    if not line.startswith("- "):
                        continue
                    text = line[2:]
                    claim = self.ledger.get(text) or Claim(text, "unknown", "unknown")
                    if claim.text not in seen:
                        seen.add(claim.text)
                        out.append(claim)
            else:
                turn = ordinal(s.id) if self.turn_of is None else self.turn_of.get(s.id, 0)
                for f in self.workload.facts_in(turn, s.text):
                    if f.statement not in seen:
                        seen.add(f.statement)
                        out.append(_fact_claim(f))
        out.sort(key=lambda c: c.cycle)
        return out

    # -- the three mistakes ---------------------------------------------------------------------

    def _drop(self, claims: list[Claim]) -> list[Claim]:
        kept = []
        for c in claims:
            # Merges and inventions are conclusions the story now rests on: never dropped.
            if c.origin == "fact" and self.rng.random() < self.drop:
                self.drops += 1
                continue
            kept.append(c)
        return kept

    def _merge(self, claims: list[Claim]) -> list[Claim]:
        out: list[Claim] = []
        for c in claims:
            prev = next((p for p in reversed(out) if p.kind == c.kind), None)
            if (
                prev is not None
                and c.kind in MERGEABLE
                and c.origin in ("fact", "merged")
                and prev.origin in ("fact", "merged")
                and not set(c.subjects) & set(prev.subjects)
                and self.rng.random() < self.merge
            ):
                out[out.index(prev)] = _merged(prev, c)
                self.merges += 1
                continue
            out.append(c)
        return out

    def _invent(self, claims: list[Claim]) -> Claim | None:
        """A plausible specific that no observation states, fitted to what it read."""
        r = self.rng
        finished = {
            c.subjects[0]
            for c in claims
            if c.kind == "migration" and (c.detail.get("phase") in ("completed", "failed") or c.origin == "invented")
        }
        options: list[tuple[int, Claim]] = []  # (weight, claim); weights by kind below
        for c in claims:
            if c.origin != "fact":
                continue
            if c.kind == "migration" and c.subjects[0] not in finished and c.time:
                t = self._fresh_time(c.time, 2, 9)
                if t:
                    options.append((4, Claim(f"migration {c.subjects[0]} completed at {t}", "invented", "migration",
                                             subjects=c.subjects, cycle=c.cycle, time=t)))
            elif c.kind == "api_failure" and c.time:
                t = self._fresh_time(c.time, 3, 14)
                if t:
                    options.append((2, Claim(f"{c.subjects[0]} recovered at {t} after a restart", "invented",
                                             "api_failure", subjects=c.subjects, cycle=c.cycle, time=t)))
            elif c.kind == "deploy" and c.time:
                t = self._fresh_time(c.time, 4, 20)
                if t:
                    options.append((1, Claim(f"{c.subjects[0]} {c.detail.get('version', '')} was rolled back at {t}",
                                             "invented", "deploy", subjects=c.subjects, cycle=c.cycle, time=t)))
            elif c.kind == "file_edit":
                options.append((1, Claim(f"the change to {c.subjects[0]} was merged in PR #{r.randint(1200, 4800)}",
                                         "invented", "file_edit", subjects=c.subjects, cycle=c.cycle)))
        if not options:
            return None
        # What it fills in depends on what it read: an unfinished migration invites a completion
        # time above all (the seed's "the migration completed at 14:02").
        kinds = sorted({c.kind for _, c in options})
        kind = r.choices(kinds, weights=[_INVENT_WEIGHT[k] for k in kinds])[0]
        choice = r.choice([c for _, c in options if c.kind == kind])
        if choice.text in self.ledger or any(choice.text == i.text for i in self.inventions):
            return None
        if choice.time:
            self._used_times.add(choice.time)
        self.inventions.append(choice)
        return choice

    def _fresh_time(self, after: str, lo: int, hi: int) -> str:
        """A clock time shortly after ``after`` that no observation mentions."""
        h, m = (int(x) for x in after.split(":"))
        base = h * 60 + m
        candidates = [clock(base + d) for d in range(lo, hi + 1)]
        self.rng.shuffle(candidates)
        for t in candidates:
            if not self.workload.observed_time(t) and t not in self._used_times:
                return t
        return ""

    # -- writing --------------------------------------------------------------------------------

    def _fit(self, claims: list[Claim], context: list[str], max_tokens: int | None) -> tuple[list[Claim], list[str]]:
        """Stay within the token budget: context lines go first, then the oldest genuine facts
        (never the story it has come to believe)."""
        if not max_tokens:
            return claims, context
        budget = max_tokens * 3  # characters, conservatively (about 3 characters a token)
        size = len(SUMMARY_HEADER) + len(_PROSE) + 12 + sum(len(c.text) + 3 for c in claims) + sum(len(x) + 3 for x in context)
        context = list(context)
        while size > budget and context:
            size -= len(context.pop()) + 3
        out = list(claims)
        i = 0
        while size > budget and i < len(out):
            if out[i].origin == "fact":
                size -= len(out[i].text) + 3
                out.pop(i)
                self.drops += 1
            else:
                i += 1
        return out, context

    def _context(self, spans: Sequence[Span]) -> list[str]:
        """One line per tool call it read: what was done, with no specifics beyond the call's own."""
        out = []
        for s in spans:
            if s.derived or s.kind != "tool_call":
                continue
            name = s.meta.get("name", "tool")
            args = s.meta.get("arguments") or {}
            target = next((str(v) for k, v in args.items() if k in ("service", "path", "name", "migration")), "")
            gist = _GIST.get(name, "done")
            out.append(f"{name} {target}: {gist}".replace("  ", " "))
        return out

    def _write(self, spans: Sequence[Span], claims: list[Claim], context: list[str]) -> str:
        lines = [SUMMARY_HEADER, _PROSE] + [f"- {c.text}" for c in claims]
        if context:
            lines.append("context:")
            lines += [f"* {x}" for x in context]
        return "\n".join(lines)


def _fact_claim(f: Fact) -> Claim:
    return Claim(f.statement, "fact", f.kind, (f.id,), (f.subject,), f.cycle, f.time, dict(f.detail))


_MERGE_TEXT = {
    "api_failure": lambda subj, a: f"the API failure (HTTP {a.detail.get('code')} at {a.time}, {a.detail.get('error')}) hit {subj}",
    "deploy": lambda subj, a: f"the deploy: {subj} went out as {a.detail.get('version')} to prod at {a.time}",
    "file_edit": lambda subj, a: f"the config edit: {subj} changed {a.detail.get('change', '')}".rstrip(),
}


def _merged(a: Claim, b: Claim) -> Claim:
    subjects = a.subjects + tuple(s for s in b.subjects if s not in a.subjects)
    subj = ", ".join(subjects[:-1]) + " and " + subjects[-1]
    detail = dict(a.detail)
    if a.kind == "file_edit" and "change" not in detail:
        detail["change"] = a.text.split(": ", 1)[-1] if a.origin == "fact" else ""
    text = _MERGE_TEXT[a.kind](subj, _Proxy(a, detail))
    return Claim(text, "merged", a.kind, tuple(dict.fromkeys(a.facts + b.facts)), subjects, a.cycle, a.time, detail)


class _Proxy:
    def __init__(self, claim: Claim, detail: dict):
        self.time = claim.time
        self.detail = detail
