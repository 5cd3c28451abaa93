"""Claims a summary makes that no single specific carries: what the user asked for, what was done,
whether something failed, which fact belongs to which thing.

Four deterministic checks over a derived text and its ORIGINAL sources (each with its role when
known), beside the specifics check of ``projections.grounding``:

- ``invented-instruction``: "the user asked to …", "per the user's instructions …" must be stated
  by a USER source — not by a tool's output or by the assistant's own words (a resumed agent
  executes what the summary says the user wanted);
- ``unsupported-completion``: "tests pass", "committed and pushed", "migration completed", "fixed"
  need a source that shows it done; one whose last word on it is a failure contradicts it;
- ``status-flip``: a thing the summary calls succeeded / failed / rolled back / restarted (or not)
  whose sources say the opposite;
- ``swapped-pairing``: specifics a summary clause binds together (a service and a status code, a
  ticket and a person) that each appear in the sources but never in one source span together.

Findings are plain dicts like the grounding findings (``kind``, ``value``, ``severity``,
``message``, ``offset``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from projections.specifics import SourceIndex, Specific, extract, tokens

__all__ = [
    "Source",
    "claim_findings",
    "user_instructions",
    "completions",
    "status_flips",
    "swapped_pairings",
    "INVENTED_INSTRUCTION",
    "UNSUPPORTED_COMPLETION",
    "STATUS_FLIP",
    "SWAPPED_PAIRING",
    "CLAIM_KINDS",
]

INVENTED_INSTRUCTION = "invented-instruction"
UNSUPPORTED_COMPLETION = "unsupported-completion"
STATUS_FLIP = "status-flip"
SWAPPED_PAIRING = "swapped-pairing"
CLAIM_KINDS = (INVENTED_INSTRUCTION, UNSUPPORTED_COMPLETION, STATUS_FLIP, SWAPPED_PAIRING)


@dataclass(frozen=True, slots=True)
class Source:
    """A source observation's text and who said it (``user``, ``assistant``, ``tool``, ``system``;
    empty when unknown). ``harness``: text a tool's harness wrote around the conversation (an
    imported transcript's "This session is being continued…"): it grounds, but a summary is not
    expected to keep its specifics."""

    text: str
    role: str = ""
    harness: bool = False


# -- shared text helpers ------------------------------------------------------------------------

_STOP = frozenset(
    """a an the of in on at to for by with from and or but is are was were be been being has have had
    it its this that these those as after before over under into onto up down out off than then so
    please can could would should will shall may might must do does did done not no yes just also
    only very more most some any all each both me my i we our us you your they them their he she his
    her him user users asked ask asks asking request requested requests wants wanted want instructed
    instruction instructions told tell said says say per explicitly like would about again still keep""".split()
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSE = re.compile(r";|,\s+(?:and|but|while|whereas)\s+|\s+(?:and|but|while|whereas|then)\s+|,\s+|:\s+")


def _sentences(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for m in _SENTENCE.finditer(text):
        out.append((pos, text[pos : m.start()]))
        pos = m.end()
    out.append((pos, text[pos:]))
    return [(o, s) for o, s in out if s.strip()]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _content(text: str) -> set[str]:
    """The words that carry a claim: stems of its non-stop words outside its specifics (the verb,
    the object: "delete", "timeout"). Specifics (a path, a service, a time) are checked on their own,
    so a long path cannot outvote the verb beside it."""
    rest = []
    pos = 0
    for sp in extract(text):
        if sp.category == "quote":
            continue
        rest.append(text[pos : sp.start])
        pos = max(pos, sp.end)
    rest.append(text[pos:])
    return {_stem(t) for t in tokens(" ".join(rest)) if t.isdigit() or (len(t) >= 2 and t not in _STOP)}


# -- invented user instructions -------------------------------------------------------------------

_INSTRUCTION = re.compile(
    r"\b(?:the\s+)?user(?:'s)?\s+(?:has\s+|had\s+|also\s+|then\s+|explicitly\s+|specifically\s+)?"
    r"(?:asked|requested|wants|wanted|instructed|told|insisted|prefers|preferred|would\s+like|needs|"
    r"expects|demanded|directed|approved|agreed|confirmed|said|mentioned|specified|chose|decided)\b"
    r"|\b(?:per|following|according\s+to|as\s+per)\s+(?:the\s+)?user(?:'s)?\s+(?:request|instructions?|wishes|"
    r"preference|direction|guidance|orders?)\b"
    r"|\bas\s+(?:the\s+)?user\s+(?:requested|asked|instructed|wanted|said)\b"
    r"|\buser\s+(?:request|instruction|requirement)s?\s*(?::|was|were|is|are)"
    r"|\bthe\s+user(?:'s)?\s+(?:request|instruction|requirement|ask)\s+(?:was|is)\s+to\b",
    re.IGNORECASE,
)
INSTRUCTION_SUPPORT = 0.5  # share of the claim's content words a user message must state


def user_instructions(text: str, sources: Sequence[Source]) -> list[dict]:
    """Claims about what the user asked for that no user source states."""
    out: list[dict] = []
    if _INSTRUCTION.search(text) is None:
        return out
    known_roles = any(s.role for s in sources)
    user_texts = [s.text for s in sources if s.role == "user"] if known_roles else [s.text for s in sources]
    user_words = [_content(t) for t in user_texts]
    user_index = SourceIndex.build(user_texts) if user_texts else None
    for offset, sentence in _sentences(text):
        m = _INSTRUCTION.search(sentence)
        if m is None:
            continue
        claim = sentence[m.end() :].strip(" :,.-")
        if len(claim) < 3:
            claim = sentence[: m.start()].strip(" :,.-")  # "Keep v1 until Friday, as the user asked."
        words = _content(claim)
        specifics = [sp for sp in extract(claim) if not sp.weak and sp.category != "quote"]
        if not words and not specifics:
            continue
        best = max((len(words & uw) / len(words) for uw in user_words), default=0.0) if words else 1.0
        missing = []
        if user_index is not None:
            missing = [sp.text for sp in specifics if not user_index.supports(sp)[0]]
        elif specifics:
            missing = [sp.text for sp in specifics]
        if best >= INSTRUCTION_SUPPORT and not missing:
            continue
        if _quotes_a_user(claim, user_texts):
            continue  # 'the user asked to "work on X" - an epic for …': the words quoted are the user's
        who = "no user message" if not user_texts else "none of the user's messages"
        why = f" (the user never mentions {', '.join(repr(x) for x in missing[:3])})" if missing else ""
        out.append(
            {
                "kind": INVENTED_INSTRUCTION,
                "category": "instruction",
                "value": sentence.strip(),
                "severity": "error",
                "message": f"the summary says the user asked for {_clip(claim)!r}, which {who} among its sources says{why}",
                "offset": offset + m.start(),
                "support": round(best, 2),
            }
        )
    return out


_QUOTED = re.compile(r"\"([^\"\n]{4,300})\"|“([^”\n]{4,300})”")


def _quotes_a_user(claim: str, user_texts: Sequence[str]) -> bool:
    """The claim quotes the user's own words (what follows the quote is context, not the request)."""
    folded = [" ".join(tokens(t)) for t in user_texts]
    for m in _QUOTED.finditer(claim):
        quoted = " ".join(tokens(m.group(1) or m.group(2)))
        if quoted and any(quoted in f for f in folded):
            return True
    return False


# -- completed-work claims and status flips ------------------------------------------------------

_I = re.IGNORECASE
_M = re.IGNORECASE | re.MULTILINE


def _activity_line(word: str) -> list[tuple[re.Pattern[str], int]]:
    """Outcome lines for an activity named by ``word``: the line names it and how it went."""
    return [
        (re.compile(rf"^(?=.*\b{word}).*\b(?:fail(?:ed|s|ure)?|errors?|aborted|rolled\s+back|reverted|timed\s+out|refused|crash(?:ed)?)\b.*$", _M), -1),
        (re.compile(rf"^(?=.*\b{word}).*\b(?:completed?|finished|succeeded|successful(?:ly)?|done|applied|live|healthy)\b.*$", _M), 1),
    ]


# activity -> (how a summary claims it done, outcome lines of the sources: (pattern, +1 done / -1 not))
_ACTIVITIES: dict[str, tuple[re.Pattern[str], list[tuple[re.Pattern[str], int]]]] = {
    "tests": (
        re.compile(r"\b(?:all\s+)?(?:the\s+)?(?:unit\s+|integration\s+)?tests?(?:\s+suite)?\s+(?:now\s+|all\s+)?(?:pass(?:es|ed|ing)?|(?:are|is)\s+(?:green|passing))\b|\btest\s+suite\s+is\s+green\b|\bCI\s+is\s+green\b", _I),
        [
            (re.compile(r"\b[1-9]\d*\s+(?:failed|failures?|errors?)\b|\bFAILED\b|\btests?\s+failed\b|^FAIL\b", _M), -1),
            (re.compile(r"\b\d+\s+passed\b|\b\d+\s+tests?,\s+0\s+failures?\b|^OK\b|\ball\s+tests?\s+pass(?:ed)?\b|\btests?\s+passed\b|\bTests:\s+\d+\s+passed\b", _M), 1),
        ],
    ),
    "commit": (
        re.compile(r"\b(?:committed|pushed)\b", _I),
        [
            (re.compile(r"!\s*\[rejected\]|\bfailed\s+to\s+push\b|^fatal:|\bnothing\s+(?:added\s+)?to\s+commit\b|\bcommit\s+failed\b|^error:\s.*\b(?:push|commit|refs|merge)\b", _M), -1),
            (re.compile(r"^\[[\w./-]+(?:\s+\(root-commit\))?\s+[0-9a-f]{7,}\]|^\s*(?:[0-9a-f]{7,}\.\.[0-9a-f]{7,}|\*\s+\[new\s+branch\])\s+\S+\s+->\s+\S+", _M), 1),
        ],
    ),
    "migration": (
        re.compile(r"\bmigrations?\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|applied|ran\s+successfully)\b", _I),
        _activity_line(r"migrat"),
    ),
    "deploy": (
        re.compile(r"\b(?:deploy(?:ment)?|rollout|release)\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|successful|is\s+live)\b|\bsuccessfully\s+deployed\b", _I),
        _activity_line(r"(?:deploy|roll(?:ed)?\s*out|release)"),
    ),
    "build": (
        re.compile(r"\bbuild\b[^.;\n]{0,40}?\b(?:completed?|finished|succeeded|passe[sd]|is\s+green|successful)\b", _I),
        [
            (re.compile(r"\bbuild\s+(?:failed|error)|\bcompilation\s+(?:error|failed)|^error(?:\[E\d+\])?:\s", _M), -1),
            (re.compile(r"\bbuild\s+(?:succeeded|successful|passed|finished|complete)|^\s*Finished\b|\bCompiled\b", _M), 1),
        ],
    ),
}
_REQUEST = re.compile(
    r"\b(?:please|can\s+you|could\s+you|would\s+you|make\s+sure|ensure|should|need\s+to|needs\s+to|must|"
    r"let's|let\s+us|want\s+(?:you|to)|try\s+to|until)\b|\?\s*$",
    re.I,
)
_NOT_DONE = re.compile(r"\b(?:not|never|no\s+longer|n't|without|didn't|wasn't|weren't|hasn't|haven't|isn't|aren't|yet\s+to|still\s+(?:fail|red))\b", re.I)


def _outcome(text: str, patterns: list[tuple[re.Pattern[str], int]]) -> tuple[int, int] | None:
    """(offset, +1 / -1) of the last outcome line in ``text``, if any; a line that reports both
    ("3 failed, 12 passed") is a failure."""
    lines: dict[int, int] = {}
    for rx, polarity in patterns:
        for m in rx.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            lines[start] = min(lines.get(start, polarity), polarity)
    if not lines:
        return None
    last = max(lines)
    return last, lines[last]


def completions(text: str, sources: Sequence[Source]) -> list[dict]:
    """Claims that work was done (tests pass, committed and pushed, migration completed, deployed,
    built) that no source shows done, or that the sources' last outcome line on it contradicts.
    One finding per activity."""
    out: list[dict] = []
    claimed = [(a, rx) for a, (rx, _) in _ACTIVITIES.items() if rx.search(text)]
    if not claimed:
        return out
    evidence = [src.text for src in sources if not _REQUEST.search(src.text)]  # asking for it is not doing it
    for activity, claim_rx in claimed:
        claim = None
        for offset, sentence in _sentences(text):
            m = claim_rx.search(sentence)
            if m is not None and not _NOT_DONE.search(sentence):
                claim = (offset + m.start(), m.group(0))
                break
        if claim is None:
            continue
        verdicts = [o[1] for s in evidence for o in [_outcome(s, _ACTIVITIES[activity][1])] if o is not None]
        if verdicts and verdicts[-1] > 0:
            continue
        why = f"the sources' last word on the {activity} is a failure" if verdicts else f"no source shows the {activity} done"
        out.append(
            {
                "kind": UNSUPPORTED_COMPLETION,
                "category": activity,
                "value": claim[1],
                "severity": "error",
                "message": f"the summary claims {claim[1]!r} but {why}",
                "offset": claim[0],
            }
        )
    return out


# status families: word pattern -> (family, polarity)
_STATUS = [
    (re.compile(r"\b(?:succeed(?:ed|s)?|successful(?:ly)?|completed?|finished|passed|healthy|recovered|up)\b", re.I), "outcome", 1),
    (re.compile(r"\b(?:fail(?:ed|s|ure)?|errored|errors?|exceptions?|crashed|aborted|broke|broken|timed\s+out|time-?outs?|down|unhealthy|HTTP\s+5\d\d)\b|(?:->|returned|status)\s+5\d\d\b", re.I), "outcome", -1),
    (re.compile(r"\b(?:rolled\s+back|reverted|roll\s*back)\b", re.I), "rollback", 1),
    (re.compile(r"\b(?:restarted|rebooted|bounced)\b", re.I), "restart", 1),
    (re.compile(r"\b(?:merged)\b", re.I), "merge", 1),
    (re.compile(r"\b(?:approved)\b", re.I), "approval", 1),
]
_NEGATED = re.compile(r"\b(?:not|never|no|no\s+longer|n't|without|didn't|wasn't|weren't|hasn't|haven't|isn't|aren't|nor)\b", re.I)
# a word stem of every status pattern above: a sentence with none of them has no status
_STATUS_HINTS = (
    "succe", "complet", "finish", "pass", "health", "recover", "up", "fail", "error", "exception", "crash",
    "abort", "brok", "timed", "time", "down", "-> 5", "returned 5", "status 5", "http 5", "roll", "revert",
    "restart", "reboot", "bounce", "merged", "approved",
)
_ENTITY_CATS = ("name", "identifier", "host", "path", "version", "code", "hash", "uuid")


def _statuses(clause: str) -> list[tuple[str, int, int]]:
    """(family, polarity, offset) for each status word in the clause, negation applied."""
    lowered = clause.lower()
    if not any(hint in lowered for hint in _STATUS_HINTS):
        return []  # most sentences state no status: a few substring tests instead of a search per family
    return _scan_statuses(clause)


def _scan_statuses(clause: str) -> list[tuple[str, int, int]]:
    out = []
    for rx, family, polarity in _STATUS:
        for m in rx.finditer(clause):
            before = clause[max(0, m.start() - 24) : m.start()]
            neg = bool(_NEGATED.search(before))
            if family == "outcome" and re.search(r"\b(?:0|zero|no)\s*$", before):
                neg = not neg  # "0 failed", "no errors"
            polarity = -polarity if neg else polarity
            out.append((family, polarity, m.start()))
            if family == "rollback" and polarity > 0:
                out.append(("outcome", -1, m.start()))  # what was rolled back did not succeed
    return out


def _entity_keys(clause: str, found: list[Specific]) -> set[str]:
    return {"".join(tokens(sp.text)) for sp in found if sp.category in _ENTITY_CATS and not sp.weak}


def _within(found: list[Specific], start: int, end: int, starts: list[int] | None = None) -> list[Specific]:
    """The specifics inside [start, end) of a list sorted by start (``starts``: their starts)."""
    starts = starts if starts is not None else [sp.start for sp in found]
    out = []
    for k in range(bisect_left(starts, start), bisect_left(starts, end)):
        if found[k].end <= end:
            out.append(found[k])
    return out


def status_flips(
    text: str, sources: Sequence[Source], index: SourceIndex | None = None, found: list[Specific] | None = None
) -> list[dict]:
    """A thing the summary gives a status (succeeded, failed, rolled back, restarted, or not) whose
    sources, wherever they name it with a status of the same kind, say the opposite. (``index`` and
    ``found``: the sources' index and the summary's specifics, when already built.)"""
    out: list[dict] = []
    claims = []  # (offset, clause, statuses, entities): the summary first, the sources only if needed
    needles: set[str] = set()  # a word of each such thing, to skip sources that name none of them
    for offset, sentence in _sentences(text):
        for clause_offset, clause in _clauses(sentence):
            st = _statuses(clause)
            if st:
                start = offset + clause_offset
                mine = _within(found, start, start + len(clause)) if found is not None else extract(clause)
                ents = _entity_keys(clause, mine)
                if ents:
                    claims.append((start, clause, st, ents))
                    needles.update(t for sp in mine if sp.category in _ENTITY_CATS for t in tokens(sp.text)[:1])
    if not claims:
        return out
    src_sentences: list[tuple[set[str], list[tuple[str, int, int]]]] = []
    for i, src in enumerate(sources):
        lowered = src.text.lower()
        if not any(n in lowered for n in needles):
            continue  # names none of the things the summary gives a status
        starts = [sp.start for sp in index.per_text[i]] if index is not None else None
        for start, sentence in _sentences(src.text):
            st = _statuses(sentence)
            if st:
                theirs = _within(index.per_text[i], start, start + len(sentence), starts) if index is not None else extract(sentence)
                src_sentences.append((_entity_keys(sentence, theirs), st))
    for at_clause, clause, st, ents in claims:
        for family, polarity, at in st:
            said = {p for keys, sst in src_sentences if keys & ents for f, p, _ in sst if f == family}
            if said and polarity not in said:
                word = clause[at:].split()[0] if clause[at:].split() else clause
                out.append(
                    {
                        "kind": STATUS_FLIP,
                        "category": family,
                        "value": clause.strip(),
                        "severity": "error",
                        "message": (
                            f"the summary says {_clip(clause.strip())!r} but its sources say the opposite "
                            f"about {', '.join(sorted(ents))} ({word!r} is contradicted)"
                        ),
                        "offset": at_clause + at,
                    }
                )
                break
    return out


# -- swapped pairings ---------------------------------------------------------------------------

_PAIRABLE = ("name", "identifier", "host", "number", "time", "code", "version", "path", "date", "quantity", "url", "email")


def _clauses(sentence: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for m in _CLAUSE.finditer(sentence):
        out.append((pos, sentence[pos : m.start()]))
        pos = m.end()
    out.append((pos, sentence[pos:]))
    return [(o, c) for o, c in out if c.strip()]


# categories whose normalization keeps their words: a source can only state one of these if it
# has all of its words (numbers, times, dates and quantities are normalized across forms)
_WORDY = frozenset({"name", "identifier", "host", "path", "url", "email", "code", "version"})


@dataclass
class _PerSource:
    """Which single source spans state a specific (one index per span, built on first need)."""

    index: SourceIndex
    _indexes: dict[int, SourceIndex] = field(default_factory=dict)
    _words: list[set[str]] | None = None
    _keys: dict[int, set[str]] = field(default_factory=dict)

    def holds(self, i: int, sp: Specific) -> bool:
        keys = self._keys.get(i)
        if keys is None:
            keys = self._keys[i] = {s.key for s in self.index.per_text[i]}
        if sp.key in keys:
            return True  # stated there in the same normalized form: no index needed
        idx = self._indexes.get(i)
        if idx is None:
            idx = self._indexes[i] = SourceIndex.build([self.index.texts[i]], [self.index.per_text[i]], [self.index.tok_lists[i]])
        return idx.supports(sp)[0]

    def holding(self, sp: Specific) -> set[int]:
        candidates = range(len(self.index.texts))
        if sp.category in _WORDY:
            if self._words is None:
                self._words = [set(tk) for tk in self.index.tok_lists]
            need = set(tokens(sp.text))
            candidates = [i for i in candidates if need <= self._words[i]] if need else candidates
        return {i for i in candidates if self.holds(i, sp)}


def swapped_pairings(
    text: str, sources: Sequence[Source], index: SourceIndex | None = None, found: list[Specific] | None = None
) -> list[dict]:
    """Specifics one summary clause binds together that each appear in the sources but never in one
    source span together: every fact is real, the pairing is not."""
    texts = [s.text for s in sources]
    if len(texts) < 2:
        return []  # one span: every pairing co-occurs in it
    index = index if index is not None else SourceIndex.build(texts)
    found = found if found is not None else extract(text)
    per = _PerSource(index)
    out: list[dict] = []
    for offset, sentence in _sentences(text):
        for clause_offset, clause in _clauses(sentence):
            start = offset + clause_offset
            bound = [
                sp for sp in _within(found, start, start + len(clause))
                if sp.category in _PAIRABLE and not sp.weak and index.supports(sp)[0]  # unsupported: the specifics check
            ]
            pair = _unpaired(bound, per)
            if pair is None:
                continue
            a, b = pair
            out.append(
                {
                    "kind": SWAPPED_PAIRING,
                    "category": f"{a.category}+{b.category}",
                    "value": f"{a.text} … {b.text}",
                    "severity": "error",
                    "message": (
                        f"the summary pairs {a.text!r} with {b.text!r}, but no source states them together "
                        "(each is stated, about something else): facts may have been swapped"
                    ),
                    "offset": a.start,
                }
            )
    return out


def _unpaired(bound: list[Specific], per: _PerSource) -> tuple[Specific, Specific] | None:
    """The first two specifics of different kinds, one of them naming a thing (a service, a ticket,
    a host, a path), both stated, that no one source states together. The sources holding the named
    thing are found first (a cheap word filter), and only they are asked about the other."""
    holders: dict[int, set[int]] = {}
    for i in range(len(bound)):
        for j in range(i + 1, len(bound)):
            a, b = bound[i], bound[j]
            if a.category == b.category or (a.category not in _WORDY and b.category not in _WORDY):
                continue  # a swap gives a fact to the wrong thing: one side names the thing
            first, other, k = (a, b, i) if a.category in _WORDY or b.category not in _WORDY else (b, a, j)
            if k not in holders:
                holders[k] = per.holding(first)
            held = holders[k]
            if held and not any(per.holds(s, other) for s in held):
                return a, b
    return None


# -- entry point ------------------------------------------------------------------------------


def claim_findings(
    text: str, sources: Sequence[Source], index: SourceIndex | None = None, found: list[Specific] | None = None
) -> list[dict]:
    """Every claim finding for ``text`` against ``sources`` (``index``: the sources' ``SourceIndex``
    and ``found``: the specifics of ``text``, when the caller has them already)."""
    index = index if index is not None else SourceIndex.build([s.text for s in sources])
    found = found if found is not None else extract(text)
    return [
        *user_instructions(text, sources),
        *completions(text, sources),
        *status_flips(text, sources, index, found),
        *swapped_pairings(text, sources, index, found),
    ]


def _clip(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
