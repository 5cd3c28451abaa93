"""Rule ``merged``: events the sources keep apart are not merged into one.

The sources describe two or more distinct events of one kind (failures of two different services,
two deployments) and the derived text speaks of one ("the API failure") naming at most one of
them, or gives several subjects one event's details -- the seed's "two separate API failures were
collapsed into the API failure". A contradiction of the sources: an error when the text names none
or several of them, a warning when it names only one (it may just be about that one).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import TECH_PARTS, SourceIndex, Specific, extract, grams, tokens
from projections.grounding.text import sentences

__all__ = ["MERGED", "merged_events"]

MERGED = "merged-events"


_EVENT_KINDS: dict[str, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], str]] = {}


def _kind(name: str, source: str, singular: str, plural: str, noun: str) -> None:
    det = r"\b(?:the|a|an|this|that|one|single|same|its|their)\s+(?:[\w./'-]+\s+){0,4}?"
    _EVENT_KINDS[name] = (
        lazy(source, re.IGNORECASE),
        lazy(det + r"(?:" + singular + r")\b", re.IGNORECASE),
        # more than one event: a plural noun, a count or "both" qualifying an event word, "twice"
        lazy(
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

_SENTENCE_SPLIT = lazy(r"(?<=[.!?;])\s+|\n+")
_ENTITY_CATEGORIES = ("name", "host", "identifier")
_TECH_HINT = lazy(
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
    return any(p in TECH_PARTS for p in re.split(r"[-_.]", text.lower()))


@rule("merged", (MERGED,),
      "Events the sources keep apart (failures of two services) are not told as one event.")
def check_merged(ev: Evidence) -> list[GroundingFinding]:
    return merged_events(ev.text, ev.index)


def merged_events(text: str, sources: Sequence[str] | SourceIndex) -> list[GroundingFinding]:
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
            for start, sentence in sentences(src):
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
        out.append(finding(
            "merged", MERGED, severity, phrase.group(0),
            f"the sources describe {len(groups)} distinct {noun} ({listing}) but the derived "
            f"text speaks of one ({phrase.group(0)!r}) and {which}: distinct events may have been merged",
            offset=phrase.start(), category=kind, entities=labels,
            source_indexes=sorted(set().union(*(g[1] for g in groups))),
        ))
    return out


def _attributes(specifics: list[Specific]) -> set[str]:
    """What tells one event from another: its status codes, times, durations."""
    return {sp.key for sp in specifics if sp.category in ("time", "quantity", "code") or (sp.category == "number" and not sp.weak)}


def _sentence_at(text: str, offset: int) -> str:
    return next((s for o, s in sentences(text) if o <= offset < o + len(s) + 1), text)


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


def _overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    return any(k in b for k in a)


