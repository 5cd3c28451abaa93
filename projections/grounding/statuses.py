"""Rule ``status``: a status the summary gives a thing is not the opposite of what its sources say.

"billing-api was not rolled back" when a source says billing-api was rolled back; "the deploy
succeeded" when the sources say it failed: the sources contradict the summary (an error). Statuses
are compared only where a source names the same thing with a status of the same family
(outcome, rollback, restart, merge, approval), with negation applied ("not", "0 failed", "ERROR=0":
a count of zero negates what it counts, but the 0 of "WARN=0 ERROR=1" is WARN's value).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from collections.abc import Sequence

from projections.grounding.evidence import DESCRIPTIVE_HARNESS, Evidence, Source
from projections.grounding.lazy import lazy
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import SourceIndex, Specific, extract, tokens
from projections.grounding.text import clauses, clip, sentences

__all__ = ["STATUS_FLIP", "status_flips", "within", "ENTITY_CATEGORIES"]

STATUS_FLIP = "status-flip"

# status families: word pattern -> (family, polarity)
_STATUS = [
    (lazy(r"\b(?:succeed(?:ed|s)?|successful(?:ly)?|completed?|finished|passed|healthy|recovered|up)\b", re.I), "outcome", 1),
    (lazy(r"\b(?:fail(?:ed|s|ure)?|errored|errors?|exceptions?|crashed|aborted|broke|broken|timed\s+out|time-?outs?|down|unhealthy|HTTP\s+5\d\d)\b|(?:->|returned|status)\s+5\d\d\b", re.I), "outcome", -1),
    (lazy(r"\b(?:rolled\s+back|reverted|roll\s*back)\b", re.I), "rollback", 1),
    (lazy(r"\b(?:restarted|rebooted|bounced)\b", re.I), "restart", 1),
    (lazy(r"\b(?:merged)\b", re.I), "merge", 1),
    (lazy(r"\b(?:approved)\b", re.I), "approval", 1),
]
_NEGATED = lazy(r"\b(?:not|never|no|no\s+longer|n't|without|didn't|wasn't|weren't|hasn't|haven't|isn't|aren't|nor)\b", re.I)
# a word stem of every status pattern above: a sentence with none of them has no status
_STATUS_HINTS = (
    "succe", "complet", "finish", "pass", "health", "recover", "up", "fail", "error", "exception", "crash",
    "abort", "brok", "timed", "time", "down", "-> 5", "returned 5", "status 5", "http 5", "roll", "revert",
    "restart", "reboot", "bounce", "merged", "approved",
)
_ZERO_BEFORE = re.compile(r"(?<![=:\w])(?:0|zero|no)\s*$", re.I)
_ZERO_AFTER = re.compile(r"\s*[=:]\s*0(?![\w.])")
ENTITY_CATEGORIES = ("name", "identifier", "host", "path", "version", "code", "hash", "uuid")


def _statuses(clause: str) -> list[tuple[str, int, int]]:
    """(family, polarity, offset) for each status word in the clause, negation applied."""
    lowered = clause.lower()
    if not any(hint in lowered for hint in _STATUS_HINTS):
        return []  # most sentences state no status: a few substring tests instead of a search per family
    return _scan_statuses(clause)


def _cites_output(clause: str, sources: Sequence[Source], index: SourceIndex | None) -> bool:
    """Does the clause quote (in backticks or double quotes) a stretch of output of 12 characters or
    more that a source prints verbatim? A status given with the output that shows it is about that
    moment of the session -- a failure later fixed, a success logged -- not the thing's last state."""
    quoted = [q for m in _QUOTED_OUTPUT.finditer(clause) if len(q := m.group(1) or m.group(2)) >= 12]
    if not quoted:
        return False
    lowered = index.lower if index is not None else "\n".join(s.text for s in sources).lower()
    return any(q.lower() in lowered for q in quoted)


_QUOTED_OUTPUT = re.compile(r"`([^`\n]+)`|\"([^\"\n]+)\"")
# a status under a condition or a modal is no statement of it: "V88 will fail if it runs first"
_MODAL = lazy(r"\b(?:will|would|could|might|may|can|if|unless|whether|should)\b(?:\s+\w+)?\s*$", re.I)


def _scan_statuses(clause: str) -> list[tuple[str, int, int]]:
    out = []
    for rx, family, polarity in _STATUS:
        for m in rx.finditer(clause):
            before = clause[max(0, m.start() - 24) : m.start()]
            if _MODAL.search(before):
                continue
            neg = bool(_NEGATED.search(before))
            # "0 failed", "no errors", "ERROR=0": a count of zero negates what it counts; the 0 of
            # "WARN=0 ERROR=1" is WARN's value, not a count of the errors after it
            if family == "outcome" and (_ZERO_BEFORE.search(before) or _ZERO_AFTER.match(clause, m.end())):
                neg = not neg
            polarity = -polarity if neg else polarity
            out.append((family, polarity, m.start()))
            if family == "rollback" and polarity > 0:
                out.append(("outcome", -1, m.start()))  # what was rolled back did not succeed
    return out


def _entity_keys(clause: str, found: list[Specific]) -> set[str]:
    return {_squashed(sp.text) for sp in found if sp.category in ENTITY_CATEGORIES and not sp.weak}


@functools.lru_cache(maxsize=1 << 16)
def _squashed(text: str) -> str:
    return "".join(tokens(text))


def within(found: list[Specific], start: int, end: int, starts: list[int] | None = None) -> list[Specific]:
    """The specifics inside [start, end) of a list sorted by start (``starts``: their starts)."""
    starts = starts if starts is not None else [sp.start for sp in found]
    out = []
    for k in range(bisect_left(starts, start), bisect_left(starts, end)):
        if found[k].end <= end:
            out.append(found[k])
    return out


@rule("status", (STATUS_FLIP,),
      "A thing the summary gives a status (succeeded, failed, rolled back, restarted, or not) is not "
      "given the opposite status wherever its sources name it.")
def check_statuses(ev: Evidence) -> list[GroundingFinding]:
    return status_flips(ev.text, ev.sources, ev.index, ev.found)


def status_flips(
    text: str, sources: Sequence[Source], index: SourceIndex | None = None, found: list[Specific] | None = None
) -> list[GroundingFinding]:
    """A thing the summary gives a status (succeeded, failed, rolled back, restarted, or not) whose
    sources, wherever they name it with a status of the same kind, say the opposite. (``index`` and
    ``found``: the sources' index and the summary's specifics, when already built.) Harness text
    that instructs the model (the compaction prompt) is not a statement about anything."""
    out: list[dict] = []
    claims = []  # (offset, clause, statuses, entities): the summary first, the sources only if needed
    needles: set[str] = set()  # a word of each such thing, to skip sources that name none of them
    for offset, sentence in sentences(text):
        for clause_offset, clause in clauses(sentence):
            st = _statuses(clause)
            if st and _cites_output(clause, sources, index):
                st = []  # "failed with `config.go:23:15: undefined: fmt`": the output it quotes is the evidence
            if st:
                start = offset + clause_offset
                mine = within(found, start, start + len(clause)) if found is not None else extract(clause)
                ents = _entity_keys(clause, mine)
                if ents:
                    claims.append((start, clause, st, ents))
                    needles.update(t for sp in mine if sp.category in ENTITY_CATEGORIES for t in tokens(sp.text)[:1])
    if not claims:
        return out
    named = set().union(*(ents for _, _, _, ents in claims))
    read: dict[tuple[str, int], list[tuple[set[str], list[tuple[str, int, int]]]]] = {}
    src_sentences: list[tuple[set[str], list[tuple[str, int, int]]]] = []
    for i, src in enumerate(sources):
        if src.harness in DESCRIPTIVE_HARNESS:
            continue
        lowered = src.text.lower()
        if not any(n in lowered for n in needles):
            continue  # names none of the things the summary gives a status
        if index is None:
            for start, sentence in sentences(src.text):
                st = _statuses(sentence)
                if st:
                    src_sentences.append((_entity_keys(sentence, extract(sentence)), st))
            continue
        key = (src.text, id(index.per_text[i]))  # a text given twice says the same twice
        said = read.get(key)
        if said is None:
            said = read[key] = []
            if named.isdisjoint(_entity_keys("", index.per_text[i])):
                continue  # no sentence of it can name one of the things
            starts = [sp.start for sp in index.per_text[i]]
            for start, sentence in sentences(src.text):
                # a sentence that names none of the things is not read for statuses (the same verdicts)
                keys = _entity_keys(sentence, within(index.per_text[i], start, start + len(sentence), starts))
                if keys & named:
                    st = _statuses(sentence)
                    if st:
                        said.append((keys, st))
        src_sentences.extend(said)
    for at_clause, clause, st, ents in claims:
        for family, polarity, at in st:
            said = {p for keys, sst in src_sentences if keys & ents for f, p, _ in sst if f == family}
            if said and polarity not in said:
                word = clause[at:].split()[0] if clause[at:].split() else clause
                out.append(finding(
                    "status", STATUS_FLIP, "error", clause.strip(),
                    f"the summary says {clip(clause.strip())!r} but its sources say the opposite "
                    f"about {', '.join(sorted(ents))} ({word!r} is contradicted)",
                    offset=at_clause + at, category=family,
                ))
                break
    return out


