"""Grounding: is a derived text supported by the ORIGINAL observations it was made from?

Three checks, all deterministic and offline (regular expressions and normalization, no model):

- unsupported specifics: every specific of the derived text (see ``projections.specifics``) must be
  stated by at least one source, after normalization. One that is not is an invented or altered
  fact -- the seed's "the migration completed at 14:02".
- merged events: the sources describe two or more distinct events of the same kind (failures of two
  different services) and the derived text speaks of one ("the API failure") naming at most one of
  them -- the seed's "two separate API failures were collapsed into the API failure".
- coverage: which specifics of the sources the derived text dropped (information, not an error:
  summaries are meant to drop things; a reviewer wants to see what).

``check(text, sources)`` runs all three; ``gate_findings(text, sources)`` is what the write-side
grounding gate (``rewrite(..., gate=True)``) refuses on: error-level unsupported specifics only.
Findings are plain JSON-serializable dicts so they can be stored inside a ``RewriteRefused`` event.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from projections.claims import CLAIM_KINDS, Source, claim_findings
from projections.specifics import Specific, SourceIndex, extract, grams, tokens

__all__ = [
    "GroundingResult",
    "check",
    "gate_findings",
    "unsupported",
    "merged_events",
    "coverage",
    "UNSUPPORTED",
    "MERGED",
    "NEAR_QUOTE",
    "DRIFT_KINDS",
    "Source",
]

UNSUPPORTED = "unsupported-specific"
MERGED = "merged-events"
NEAR_QUOTE = "near-quote"
DRIFT_KINDS = (UNSUPPORTED, MERGED, *CLAIM_KINDS)  # the finding kinds that mean a summary drifted

_CATEGORY_WORDS = {
    "time": "time",
    "date": "date",
    "quantity": "quantity",
    "number": "number",
    "version": "version",
    "uuid": "UUID",
    "hash": "hash",
    "code": "code",
    "identifier": "identifier",
    "path": "path",
    "url": "URL",
    "email": "email address",
    "host": "host",
    "quote": "quotation",
    "name": "name",
}


@dataclass(slots=True)
class GroundingResult:
    """Everything ``check`` found for one derived text."""

    findings: list[dict] = field(default_factory=list)
    specifics: int = 0  # specifics in the derived text
    source_specifics: int = 0  # distinct strong specifics in the sources
    dropped: list[str] = field(default_factory=list)  # of those, the ones the derived text lost

    @property
    def coverage(self) -> float:
        if not self.source_specifics:
            return 1.0
        return 1 - len(self.dropped) / self.source_specifics


def unsupported(
    text: str,
    index: SourceIndex,
    *,
    lowercase_vocabulary: frozenset[str] | None = None,
    found: list[Specific] | None = None,
) -> tuple[list[dict], int]:
    """Findings for the specifics of ``text`` that ``index`` does not support, and how many
    specifics ``text`` has (``found``: the specifics of ``text`` if already extracted)."""
    if found is None:
        found = extract(text, lowercase_vocabulary=lowercase_vocabulary)
    out: list[dict] = []
    seen: set[str] = set()
    n_sources = len(index.texts)
    for sp in found:
        ok, near = index.supports(sp)
        if ok:
            continue
        key = sp.key
        if key in seen:
            continue
        seen.add(key)
        if sp.category == "quote":
            close = _near_quote(sp.value, index) or _code_words(sp, index)
            if close is not None:
                out.append(
                    {
                        "kind": NEAR_QUOTE,
                        "category": "quote",
                        "value": sp.text,
                        "severity": "info",
                        "message": f"quotation {sp.text!r} is not verbatim; the closest source words are {close!r}",
                        "offset": sp.start,
                        "near": [close],
                    }
                )
                continue
        severity = _severity(sp, index, near)
        what = _CATEGORY_WORDS.get(sp.category, sp.category)
        message = f"{what} {sp.text!r} is " + (
            "not in its source observation" if n_sources == 1 else f"in none of its {n_sources} source observations"
        )
        if near:
            message += f" (they say {', '.join(repr(x) for x in near)})"
        elif sp.weak and sp.category == "number":
            message += " (a count may have been inferred)"
        out.append(
            {
                "kind": UNSUPPORTED,
                "category": sp.category,
                "value": sp.text,
                "severity": severity,
                "message": message,
                "offset": sp.start,
                "near": list(near),
            }
        )
    return out, len(found)


NEAR_QUOTE_RATIO = 0.9  # a quote this close to source words (by character edits) is a near-quote, not an invention


def _near_quote(value: str, index: SourceIndex) -> str | None:
    """The source words closest to a quote that is not verbatim, when they differ by small edits
    (a word changed or dropped, different punctuation, a typo): the same words, misquoted."""
    from difflib import SequenceMatcher

    words = value.split()
    if len(words) < 3:
        return None
    want = len(words)
    best, best_ratio = None, 0.0
    for toks in index.tok_lists:
        if len(set(words) & set(toks)) < want / 2:
            continue
        for size in (want - 1, want, want + 1):
            if size < 1 or size > len(toks):
                continue
            for i in range(len(toks) - size + 1):
                window = toks[i : i + size]
                if window[0] not in words and window[-1] not in words:
                    continue
                candidate = " ".join(window)
                ratio = SequenceMatcher(None, value, candidate, autojunk=False).ratio()
                if ratio > best_ratio:
                    best, best_ratio = candidate, ratio
    return best if best_ratio >= NEAR_QUOTE_RATIO else None


def _code_words(sp: Specific, index: SourceIndex) -> str | None:
    """A backticked code span whose every word the sources use: code re-typed from what was read
    (``{:ok, trace_id} | :error``), not copied; a note, not an invention."""
    if not sp.text.startswith("`"):
        return None
    words = tokens(sp.text)
    if len(words) >= 2 and all(w in index.toks for w in words):
        return " ".join(words)
    return None


def _severity(sp: Specific, index: SourceIndex, near: list[str]) -> str:
    if not sp.weak:
        return "error"
    # A small count ("3 retries") is weak -- a summary may count -- unless the sources state a
    # different count of the same thing: then it was altered.
    if sp.category == "number" and sp.noun and near:
        return "error"
    return "warning"


# -- merged events ---------------------------------------------------------------------------------

_EVENT_KINDS: dict[str, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], str]] = {}


def _kind(name: str, source: str, singular: str, plural: str, noun: str) -> None:
    det = r"\b(?:the|a|an|this|that|one|single|same|its|their)\s+(?:[\w./'-]+\s+){0,4}?"
    _EVENT_KINDS[name] = (
        re.compile(source, re.IGNORECASE),
        re.compile(det + r"(?:" + singular + r")\b", re.IGNORECASE),
        # more than one event: a plural noun, a count or "both" qualifying an event word, "twice"
        re.compile(
            r"\b(?:" + plural + r")\b|\b(?:both|two|three|four|five|several|multiple|separate|distinct|each|"
            r"all)\b(?:\s+[\w/'-]+){0,3}?\s+(?:" + source[2:-2] + r")|\b(?:respectively|twice)\b",
            re.IGNORECASE,
        ),
        noun,
    )


_kind(
    "failure",
    r"\b(?:fail(?:ed|s|ing|ure|ures)?|errors?|errored|exceptions?|crash(?:ed|es|ing)?|outages?|"
    r"timed\s+out|time-?outs?|unavailable|refused|panic(?:ked|s)?|oom(?:-?killed)?|[45]\d\d|degraded|down)\b",
    r"failure|error|outage|incident|crash|timeout|time-out|exception|problem|issue|fault|breakage|failing",
    r"failures|errors|outages|incidents|crashes|timeouts|time-outs|exceptions|problems|issues|faults",
    "failures",
)
_kind(
    "deploy",
    r"\b(?:deploy(?:ed|s|ing|ment|ments)?|roll(?:ed)?\s*out|rollouts?|released?)\b",
    r"deploy|deployment|rollout|release",
    r"deploys|deployments|rollouts|releases",
    "deployments",
)
_kind(
    "restart",
    r"\b(?:restart(?:ed|s|ing)?|reboot(?:ed|s|ing)?)\b",
    r"restart|reboot",
    r"restarts|reboots",
    "restarts",
)
_kind(
    "migration",
    r"\b(?:migrat(?:e|ed|es|ing|ion|ions))\b",
    r"migration",
    r"migrations",
    "migrations",
)

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
_ENTITY_CATEGORIES = ("name", "host", "identifier")
_TECH_HINT = re.compile(
    r"\b([a-z][a-z0-9]*)[\s-](api|service|svc|server|db|database|worker|queue|cache|gateway|proxy|cluster)\b",
    re.IGNORECASE,
)


def _entities(sentence: str, found: list[Specific]) -> dict[str, str]:
    """Service-like names in a sentence (``found``: its specifics): key (separator-free, lower
    case) -> surface text."""
    out: dict[str, str] = {}
    for sp in found:
        if sp.category not in _ENTITY_CATEGORIES or sp.weak:
            continue
        if sp.category == "name" and sp.text.isupper():
            continue  # an acronym (API, CPU) names no particular service
        if sp.category == "identifier" and not _looks_like_service(sp.text):
            continue  # request ids, pod hashes
        out["".join(tokens(sp.text))] = sp.text
    for m in _TECH_HINT.finditer(sentence):
        if m.group(1).lower() in ("the", "a", "an", "this", "that", "our", "their", "its"):
            continue
        key = "".join(tokens(m.group(0)))
        if not any(key in k or k in key for k in out):
            out[key] = m.group(0)
    return out


def _looks_like_service(text: str) -> bool:
    from projections.specifics import TECH_PARTS

    return any(p in TECH_PARTS for p in re.split(r"[-_.]", text.lower()))


def merged_events(text: str, sources: Sequence[str] | SourceIndex) -> list[dict]:
    """Findings for events of one kind that the sources keep apart and ``text`` collapses into one."""
    out: list[dict] = []
    index = sources if isinstance(sources, SourceIndex) else None
    texts = index.texts if index is not None else tuple(sources)
    derived_grams = grams(tokens(text))
    for kind, (source_rx, singular_rx, plural_rx, noun) in _EVENT_KINDS.items():
        phrase = singular_rx.search(text)
        if phrase is None or plural_rx.search(text):
            continue
        # events: (entities, source index) per sentence that reports one; sentences sharing an
        # entity are the same event
        groups: list[tuple[dict[str, str], set[int], set[str]]] = []
        for i, src in enumerate(texts):
            specifics = index.per_text[i] if index is not None else extract(src)
            for start, sentence in _sentences(src):
                if not source_rx.search(sentence):
                    continue
                end = start + len(sentence)
                inside = [sp for sp in specifics if start <= sp.start and sp.end <= end]
                ents = _entities(sentence, inside)
                if not ents:
                    continue
                merged = [g for g in groups if _overlap(g[0], ents)]
                new_ents, new_idx, new_attrs = dict(ents), {i}, _attributes(inside)
                for g in merged:
                    new_ents.update(g[0])
                    new_idx |= g[1]
                    new_attrs |= g[2]
                    groups.remove(g)
                groups.append((new_ents, new_idx, new_attrs))
        if len(groups) < 2:
            continue
        labels = [next(iter(g[0].values())) for g in groups]
        named = [lab for g, lab in zip(groups, labels) if any(k in derived_grams for k in g[0])]
        if len(named) >= 2:
            # several subjects named: a merge only where one phrase gives them one event's details
            for candidate in singular_rx.finditer(text):
                sentence = _sentence_at(text, candidate.start())
                here = grams(tokens(sentence))
                told = [g for g in groups if any(k in here for k in g[0])]
                if len(told) >= 2 and _one_event_for_many(sentence, told):
                    phrase = candidate
                    named = [lab for g, lab in zip(groups, labels) if g in told]
                    break
            else:
                continue
        severity = "error" if len(named) != 1 else "warning"
        listing = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
        which = (
            "names none of them" if not named
            else f"names only {named[0]}" if len(named) == 1
            else f"gives {', '.join(named[:4])} one set of details"
        )
        out.append(
            {
                "kind": MERGED,
                "category": kind,
                "value": phrase.group(0),
                "severity": severity,
                "message": (
                    f"the sources describe {len(groups)} distinct {noun} ({listing}) but the derived "
                    f"text speaks of one ({phrase.group(0)!r}) and {which}: distinct events may have "
                    "been merged"
                ),
                "offset": phrase.start(),
                "entities": labels,
                "source_indexes": sorted(set().union(*(g[1] for g in groups))),
            }
        )
    return out


def _attributes(specifics: list[Specific]) -> set[str]:
    """What tells one event from another: its status codes, times, durations."""
    return {sp.key for sp in specifics if sp.category in ("time", "quantity", "code") or (sp.category == "number" and not sp.weak)}


def _sentence_at(text: str, offset: int) -> str:
    return next((s for o, s in _sentences(text) if o <= offset < o + len(s) + 1), text)


def _one_event_for_many(sentence: str, groups: list[tuple[dict[str, str], set[int], set[str]]]) -> bool:
    """A sentence naming several events' subjects gives them one event ("the API failure (HTTP 503
    at 13:58) hit billing-api and auth-service"): it states the details of exactly one of the
    events, while the events' own details differ."""
    mine = _attributes(extract(sentence))
    if not mine:
        return False
    attrs = [g[2] for g in groups if g[2]]
    if len(attrs) < 2 or any(a == b for i, a in enumerate(attrs) for b in attrs[i + 1 :]):
        return False
    holders = [a for a in attrs if mine & a]
    return len(holders) == 1  # one event's details, told of several subjects


def _sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs."""
    out = []
    pos = 0
    for m in _SENTENCE_SPLIT.finditer(text):
        out.append((pos, text[pos : m.start()]))
        pos = m.end()
    out.append((pos, text[pos:]))
    return out


def _overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    return any(k in b for k in a)


# -- coverage ------------------------------------------------------------------------------------


def coverage(text: str, index: SourceIndex, found: list[Specific] | None = None) -> tuple[int, list[str]]:
    """(distinct strong specifics in the sources, the ones ``text`` does not state)."""
    mine = SourceIndex.build([text], None if found is None else [found])
    total = 0
    dropped: list[str] = []
    seen: set[str] = set()
    for sp in index.specifics:
        if sp.weak or sp.category == "quote":
            continue
        if sp.key in seen:
            continue
        seen.add(sp.key)
        total += 1
        if not mine.supports(sp)[0]:
            dropped.append(sp.text)
    return total, dropped


# -- entry points ------------------------------------------------------------------------------


def check(
    text: str,
    sources: Sequence[str | Source],
    *,
    index: SourceIndex | None = None,
    with_coverage: bool = True,
    with_claims: bool = True,
    lowercase_vocabulary: frozenset[str] | None = None,
) -> GroundingResult:
    """Check a derived text against its original observed sources: their texts, or ``Source``s
    (text and role) so that claims about what the user asked for are held to the user's words."""
    srcs = [s if isinstance(s, Source) else Source(s) for s in sources]
    index = index if index is not None else SourceIndex.build([s.text for s in srcs])
    found = extract(text, lowercase_vocabulary=lowercase_vocabulary)
    findings, n = unsupported(text, index, found=found)
    findings.extend(merged_events(text, index))
    if with_claims:
        findings.extend(claim_findings(text, srcs, index, found))
    result = GroundingResult(findings=findings, specifics=n)
    if with_coverage:
        kept = index if not any(s.harness for s in srcs) else SourceIndex.build(
            [s.text for s in srcs if not s.harness], [p for s, p in zip(srcs, index.per_text) if not s.harness]
        )
        result.source_specifics, result.dropped = coverage(text, kept, found)
    return result


def gate_findings(text: str, sources: Sequence[str]) -> list[dict]:
    """What the write-time grounding gate refuses on: error-level unsupported specifics. An empty
    list means the rewrite may be written."""
    findings, _ = unsupported(text, SourceIndex.build(sources))
    return [f for f in findings if f["severity"] == "error"]
