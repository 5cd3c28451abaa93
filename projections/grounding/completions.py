"""Rule ``completion``: work a summary says was done is not contradicted, and happened at all.

A claim that an activity is complete ("tests pass", "committed and pushed", "deployed to
production", "the announcement was sent") is judged by what the conversation shows of that
activity, in order:

- its outcomes contradict the claim ("3 failed", "! [rejected]", "pre-commit validation failed"):
  for a claim about how things are now ("tests pass") the last outcome is a failure, for a claim
  that something happened ("committed") every outcome is -- an error;
- it appears nowhere in the conversation (no test was run, nothing was ever deployed): positive
  evidence that the claim was invented -- a warning;
- it appears, but no outcome was printed: it cannot be verified either way -- information.

Only claims count: a plan, a remaining task, a negation or a partial state ("will deploy", "not yet
committed", "about half done", a line under "Pending tasks:") claims nothing done. Harness text that
instructs the model (the compaction prompt) is no evidence; asking for the work is not doing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.text import sentences

__all__ = ["UNSUPPORTED_COMPLETION", "completions", "ACTIVITIES"]

UNSUPPORTED_COMPLETION = "unsupported-completion"

_I = re.IGNORECASE
_M = re.IGNORECASE | re.MULTILINE


@dataclass(frozen=True)
class Activity:
    claim: re.Pattern[str]  # how a summary says it is done
    mention: re.Pattern[str]  # how the conversation shows it happening at all
    outcomes: tuple[tuple[re.Pattern[str], int], ...]  # outcome lines: +1 done, -1 failed
    subject: bool = False  # its outcome lines name what they are about ("✓ Closed spotter-dov.1")


def _outcome_lines(word: str) -> tuple[tuple[re.Pattern[str], int], ...]:
    """Outcome lines for an activity named by ``word``: the line names it and how it went."""
    return (
        (lazy(rf"^(?=.*\b{word}).*\b(?:fail(?:ed|s|ure)?|errors?|aborted|rolled\s+back|reverted|timed\s+out|refused|crash(?:ed)?)\b.*$", _M), -1),
        (lazy(rf"^(?=.*\b{word}).*\b(?:completed?|finished|succeeded|successful(?:ly)?|done|applied|live|healthy)\b.*$", _M), 1),
    )


ACTIVITIES: dict[str, Activity] = {
    "tests": Activity(
        lazy(r"\b(?:all\s+)?(?:the\s+)?(?:unit\s+|integration\s+)?tests?(?:\s+suite)?\s+(?:now\s+|all\s+)?(?:pass(?:es|ed|ing)?|(?:are|is)\s+(?:green|passing))\b|\btest\s+suite\s+is\s+green\b|\bCI\s+is\s+green\b", _I),
        lazy(r"\btests?\b|\bpytest\b|\bjest\b|\bvitest\b|\brspec\b|\bunittest\b|\bspec\b", _I),
        (
            (lazy(r"\b[1-9]\d*\s+(?:failed|failures?|errors?)\b|\bFAILED\b|\btests?\s+failed\b|^FAIL\b", _M), -1),
            (lazy(r"\b\d+\s+passed\b|\b\d+\s+tests?,\s+0\s+failures?\b|^OK\b|\ball\s+tests?\s+pass(?:ed)?\b|\btests?\s+passed\b|\bTests:\s+\d+\s+passed\b", _M), 1),
        ),
    ),
    "commit": Activity(
        lazy(r"\bcommitted\b|\bcommit(?:s)?\s+(?:succeeded|went\s+through)\b", _I),
        lazy(r"\bcommit", _I),
        (
            (lazy(r"\bnothing\s+(?:added\s+)?to\s+commit\b|\bcommit\s+failed\b|\bpre-commit\b.*\bfail(?:ed|s|ure)?\b|"
                        r"\bhook\b.*\b(?:failed|blocked|rejected)\b|^error:\s.*\b(?:commit|merge)\b", _M), -1),
            (lazy(r"^\[[\w./-]+(?:\s+\(root-commit\))?\s+[0-9a-f]{7,}\]", _M), 1),
        ),
    ),
    "push": Activity(
        lazy(r"\bpushed\b", _I),
        lazy(r"\bpush", _I),
        (
            (lazy(r"!\s*\[rejected\]|\bfailed\s+to\s+push\b|^fatal:|^error:\s.*\b(?:push|refs)\b", _M), -1),
            (lazy(r"^\s*(?:[0-9a-f]{7,}\.\.[0-9a-f]{7,}|\*\s+\[new\s+branch\])\s+\S+\s+->\s+\S+", _M), 1),
        ),
    ),
    "migration": Activity(
        lazy(r"\bmigrations?\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|applied|ran\s+successfully)\b|\b(?:successfully\s+)?migrated\b", _I),
        lazy(r"\bmigrat", _I),
        _outcome_lines(r"migrat"),
    ),
    "deploy": Activity(
        lazy(r"\b(?:deployed|rolled\s+out|shipped)\b|\b(?:deploy(?:ment)?|rollout)\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|successful)\b|\b(?:is|are|went)\s+live\b", _I),
        lazy(r"\bdeploy|\brollout\b|\broll(?:ed|ing)?\s+out\b|\bkubectl\s+(?:apply|rollout)|\bhelm\s+(?:install|upgrade)|\bship(?:ped|ping)?\b", _I),
        _outcome_lines(r"(?:deploy|roll(?:ed)?\s*out|ship)"),
    ),
    "release": Activity(
        lazy(r"\b(?:released|published)\b|\brelease\b[^.;\n]{0,40}?\b(?:was\s+|has\s+been\s+)?(?:cut|tagged|published)\b", _I),
        lazy(r"\brelease|\bpublish|\bgit\s+tag\b|\btagged\b", _I),
        _outcome_lines(r"(?:releas|publish|tag)"),
    ),
    "announcement": Activity(
        lazy(r"\b(?:announced|notified|emailed)\b|\b(?:announcement|e-?mail|notification|newsletter)s?\b[^.;\n]{0,40}?\b(?:has\s+been\s+|have\s+been\s+|was\s+|were\s+)?sent\b|\bsent\s+(?:out\s+)?(?:the\s+|an?\s+)?(?:release\s+)?(?:announcement|e-?mail|notification)s?\b", _I),
        lazy(r"\bannounc|\bnotif(?:y|ied|ies|ication)|\be-?mail(?:ed|s)?\b|\bslack\b|\bnewsletter\b", _I),
        (),
    ),
    "merge": Activity(
        lazy(r"\bmerged\b", _I),
        lazy(r"\bmerg", _I),
        (
            (lazy(r"\bCONFLICT\b|\bAutomatic\s+merge\s+failed\b|\bmerge\s+failed\b|\bnot\s+mergeable\b", _M), -1),
            (lazy(r"\bMerge\s+made\s+by\b|^Fast-forward\b|\b(?:was\s+|been\s+)?merged\b", _M), 1),
        ),
    ),
    "pull request": Activity(
        lazy(r"\bopened\s+(?:a|the|an)\s+(?:draft\s+)?(?:pull\s+request|PR|merge\s+request|MR)\b|\b(?:pull\s+request|PR)\s+(?:#\d+\s+)?(?:was\s+|is\s+|has\s+been\s+)?(?:opened|created|filed|up)\b", _I),
        lazy(r"\bpull\s+request|\bmerge\s+request|\bgh\s+pr\b|\bPR\b|/pull/\d", _I),
        (
            (lazy(r"\bpull\s+request\b.*\b(?:failed|error|rejected)\b", _M), -1),
            (lazy(r"/pull/\d+|\bpull\s+request\b.*\b(?:created|opened)\b", _M), 1),
        ),
    ),
    "close": Activity(
        lazy(r"\b(?:is|was|were|are|been|got)\s+(?:now\s+|also\s+|already\s+)?(?:finished\s+and\s+)?closed\b|\bclosed\s+(?:it|the\s+(?:task|bead|issue|ticket|epic)|task|bead|issue|ticket|epic)\b", _I),
        lazy(r"\bclos(?:e|ed|es|ing)\b", _I),
        (
            (lazy(r"\b(?:cannot|can't|failed\s+to|could\s+not|unable\s+to)\s+close\b", _M), -1),
            (lazy(r"\bClosed\s+\S+|\bclosed\s+(?:issue|ticket|#\d+)", _M), 1),
        ),
        subject=True,
    ),
    "build": Activity(
        lazy(r"\bbuild\b[^.;\n]{0,40}?\b(?:completed?|finished|succeeded|passe[sd]|is\s+green|successful)\b|\bcompiles?\s+(?:cleanly|successfully)\b|\bcompiled\s+(?:cleanly|successfully)\b", _I),
        lazy(r"\bbuild|\bcompil", _I),
        (
            (lazy(r"\bbuild\s+(?:failed|error)|\bcompilation\s+(?:error|failed)|^error(?:\[E\d+\])?:\s|\*\*\s*\(CompileError\)", _M), -1),
            (lazy(r"\bbuild\s+(?:succeeded|successful|passed|finished|complete)|^\s*Finished\b|\bCompil(?:ed|ing)\s+\d+\s+files?\b|\bCompiled\b", _M), 1),
        ),
    ),
}

# a claim about how things are now ("tests pass", "the build is green", "is live"), judged by the last
# outcome; any other claim is of an event ("committed", "deployed"), which one success shows happened
_STATE = lazy(r"\b(?:pass(?:es|ing)?|is|are|green|live|compiles?|succeeds)\b", _I)

# a sentence that claims nothing done: a negation, a plan, a partial state, a condition
_NOT_DONE = lazy(
    r"\b(?:not|never|nothing|none|neither|nor|no\s+longer|n't|without|yet\s+to|still\s+(?:fail|red|need)|will|would|going\s+to|"
    r"to\s+be|needs?\s+to|should|must|plan(?:s|ned)?\s+to|next|remaining|pending|todo|half|partial(?:ly)?|"
    r"in\s+progress|once|if|until|unless|whether|attempt(?:ed|ing)?|tr(?:y|ied|ying)\s+to)\b",
    _I,
)
# a heading whose items are plans, not outcomes ("Pending Tasks:", "## Next steps", "7. Remaining work")
# in a plan's section, only a perfect or passive form still claims something done ("is closed",
# "was finished and pushed", "were already written")
_PERFECT = lazy(r"\b(?:is|are|was|were|has|have|had)\s+(?:been\s+)?(?:also\s+|already\s+|now\s+)?\w+(?:ed|en|t)\b", _I)
_PLAN_WORDS = r"(?:pending|next|remaining|todo|to-do|plan(?:ned|s)?|outstanding|future|upcoming|optional)"
_PLAN_HEADING = lazy(
    rf"^[ \t]*(?:\d{{1,3}}[.)][ \t]*)?\**[^\n:*]{{0,40}}?\b{_PLAN_WORDS}\b[^\n:*]{{0,40}}?\**[ \t]*:\**[ \t]*$"
    rf"|^[ \t]*#{{1,6}}[ \t]+[^\n]{{0,40}}?\b{_PLAN_WORDS}\b[^\n]{{0,40}}$",
    _M,
)
_HEADING = lazy(
    r"^[ \t]*(?:#{1,6}[ \t]*|\d{1,3}[.)][ \t]*|[-*•][ \t]*)?\**[^\n]{0,40}?\b(?:pending|next|remaining|todo|to-do|"
    r"plan(?:ned)?|outstanding|open|future|upcoming|optional)\b[^\n]{0,40}:?\**[ \t]*:?[ \t]*$",
    _M,
)
_HEADING = lazy(r"^[ \t]*(?:#{1,6}[ \t]+[^\n]+|(?:\d{1,3}[.)][ \t]+)?\**[A-Z][^\n:]{0,60}\**:?\**[ \t]*:?)[ \t]*$", _M)
_REQUEST = lazy(
    r"\b(?:please|can\s+you|could\s+you|would\s+you|make\s+sure|ensure|should|need\s+to|needs\s+to|must|"
    r"let's|let\s+us|want\s+(?:you|to)|try\s+to|until)\b|\?\s*$",
    _I,
)


@rule("completion", (UNSUPPORTED_COMPLETION,),
      "Work the summary says is done is not contradicted by its last outcome, and appears in the conversation at all.")
def check_completions(ev: Evidence) -> list[GroundingFinding]:
    return completions(ev)


def completions(ev: Evidence) -> list[GroundingFinding]:
    """A finding for each claim of completed work that the conversation contradicts (error), never
    shows (warning), or shows without an outcome (information)."""
    text = ev.text
    claimed = [(name, a) for name, a in ACTIVITIES.items() if a.claim.search(text)]
    if not claimed:
        return []
    plans = _plan_sections(text)
    conversation = [ev.sources[i] for i in ev.conversation]
    # asking for the work is not doing it: a user's request is no outcome
    evidence = [s.text for s in conversation if not (s.role == "user" and _REQUEST.search(s.text))]
    out: list[GroundingFinding] = []
    for name, activity in claimed:
        # a source line that itself says it was done ("deployed cart-api v2.1.0 to prod") is an outcome too
        outcomes = (*activity.outcomes, (activity.claim, 1))
        verdicts: list[int] | None = None  # of the activity as a whole, computed once
        mentioned: bool | None = None
        for offset, said, clause in _claims(text, activity.claim, plans):
            subjects = _subjects(clause) if activity.subject else []
            if subjects:
                verdict = _about(subjects, name, activity, outcomes, evidence)
                if verdict is not None:
                    severity, why = verdict
                    out.append(finding("completion", UNSUPPORTED_COMPLETION, severity, said,
                                       f"the summary claims {said!r} but {why}", offset=offset, category=name))
                continue
            if _tied_outcome(clause, evidence, outcomes):
                continue  # "31 tests pass": about the run that printed 31, which passed
            if verdicts is None:
                verdicts = [o for s in evidence for o in [_outcome(s, outcomes)] if o is not None]
            state = bool(_STATE.search(said))
            if verdicts and (verdicts[-1] > 0 or (not state and max(verdicts) > 0)):
                continue  # a state holds if its last outcome did; an event happened if any outcome shows it
            if verdicts:
                which = "last outcome" if state else "every outcome"
                severity, why = "error", f"the conversation's {which} of the {name} is a failure"
            else:
                if mentioned is None:
                    mentioned = any(activity.mention.search(s.text) for s in conversation)
                if mentioned:
                    severity, why = "info", f"the conversation mentions the {name} but shows no outcome of it (cannot be verified)"
                else:
                    severity, why = "warning", f"the conversation shows no {name} at all"
            out.append(finding("completion", UNSUPPORTED_COMPLETION, severity, said,
                               f"the summary claims {said!r} but {why}", offset=offset, category=name))
    return out


def _about(subjects: list[str], name: str, activity: Activity, outcomes, evidence: list[str]) -> tuple[str, str] | None:
    """A claim that names what it is about (what it closed) is judged by the outcomes that name it:
    (severity, why), or None when one of them shows it done."""
    named = [line for s in evidence for line in s.split("\n") if any(_names(line, x) for x in subjects)]
    verdicts = [o for line in named for o in [_outcome(line, outcomes)] if o is not None]
    if verdicts and (verdicts[-1] > 0 or max(verdicts) > 0):
        return None
    what = f"the {name} of {subjects[0]}"
    if verdicts:
        return "error", f"every outcome of {what} is a failure"
    if any(activity.mention.search(line) for line in named):
        return "info", f"the conversation mentions {what} but shows no outcome of it (cannot be verified)"
    return "warning", f"the conversation shows no {name} of {subjects[0]} at all"


def _claims(text: str, claim_rx: re.Pattern[str], plans: list[tuple[int, int]]):
    """(offset, the claim's words, its clause) of every sentence that claims the work done."""
    for offset, sentence in sentences(text):
        in_plan = any(a <= offset < b for a, b in plans)
        for m in claim_rx.finditer(sentence):
            if in_plan and not _PERFECT.search(sentence):
                continue  # an item of a plan ("- tests pass on CI"): a goal, not a claim
            clause = _clause_around(sentence, m.start(), m.end())
            if not _NOT_DONE.search(clause):
                yield offset + m.start(), m.group(0), clause
                break


_FIGURE = lazy(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w.])")


_SUBJECT = lazy(r"(?<![\w.#/-])(?:[A-Za-z][\w]*(?:[-_.][\w]+)+|#\d+)(?![\w-])")


def _subjects(clause: str) -> list[str]:
    return [m.group(0).rstrip(".") for m in _SUBJECT.finditer(clause) if any(c.isdigit() or c in "-_#" for c in m.group(0))]


def _names(line: str, subject: str) -> bool:
    """``line`` names ``subject`` itself, not a longer id it begins ("spotter-dov" is not "spotter-dov.1")."""
    i = line.find(subject)
    while i >= 0:
        before, after = line[i - 1 : i], line[i + len(subject) : i + len(subject) + 2]
        if not (before.isalnum() or before in "-_.") and not (after[:1].isalnum() or after[:1] in "-_" or (after[:1] == "." and after[1:2].isalnum())):
            return True
        i = line.find(subject, i + 1)
    return False


def _tied_outcome(clause: str, evidence: list[str], outcomes: tuple[tuple[re.Pattern[str], int], ...]) -> bool:
    """A claim that states a figure ("31 tests pass") is about the outcome that printed it: some
    successful outcome line states the same figure."""
    figures = set(_FIGURE.findall(clause))
    if not figures:
        return False
    for text in evidence:
        if not any(f in text for f in figures):
            continue
        for rx, polarity in outcomes:
            if polarity < 0:
                continue
            for m in rx.finditer(text):
                a = text.rfind("\n", 0, m.start()) + 1
                b = text.find("\n", m.end())
                line = text[a : b if b >= 0 else len(text)]
                failed = any(r.search(line) for r, p in outcomes if p < 0)
                if not failed and figures & set(_FIGURE.findall(line)):
                    return True
    return False


def _clause_around(sentence: str, start: int, end: int) -> str:
    """The clause of ``sentence`` holding [start, end): cut at ; , and before "but"."""
    left = max(sentence.rfind(sep, 0, start) for sep in (";", ",", " but ", "—", " - ")) + 1
    rights = [i for i in (sentence.find(sep, end) for sep in (";", ",", " but ", "—", " - ")) if i >= 0]
    return sentence[left : min(rights) if rights else len(sentence)]


def _plan_sections(text: str) -> list[tuple[int, int]]:
    """[start, end) of every section headed as a plan, up to the next heading."""
    headings = [(m.start(), m.end()) for m in _HEADING.finditer(text)]
    out = []
    for m in _PLAN_HEADING.finditer(text):
        following = [a for a, _ in headings if a > m.start()]
        out.append((m.end(), following[0] if following else len(text)))
    return out


def _outcome(text: str, patterns: tuple[tuple[re.Pattern[str], int], ...]) -> int | None:
    """+1 / -1 of the last outcome line in ``text``, if any; a line that reports both ("3 failed,
    12 passed") is a failure."""
    lines: dict[int, int] = {}
    for rx, polarity in patterns:
        for m in rx.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            lines[start] = min(lines.get(start, polarity), polarity)
    if not lines:
        return None
    return lines[max(lines)]
