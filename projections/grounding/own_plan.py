"""Rule ``plan``: a summary does not claim done what its own plan says is still to do.

A summary states what remains ("Pending Tasks:", "Still needs: X, Y", "Still need to:") from the same
task state it reports progress from. When a sentence elsewhere says that very item was done, the
summary contradicts itself, and one of the two statements is false: positive evidence, inside the
summary, that the claim was invented -- a warning (the sources are not needed to see it).

"That very item" is decided by the words that tell the item apart: the words of the plan item that
the rest of the summary (outside its plans, and outside the claim itself) never uses. A claim holding
all of them, and more than half of the item's content words (at least two), names the item. "Added Status column to
visible sessions table" beside "Still needs: Status column in hidden sessions table" does not (the
item's own word is "hidden"); "also added it to the hidden sessions table" does. An item's first word
(the planned step's verb: "Write LiveView tests") need not be in the claim, which says it in another
tense ("tests written"); the claim must still hold one of the item's own words.

Inside one plan item, "already <verb>ed" on the item's own planned verb, with nothing after it that
narrows it to a part ("Close after all subtasks are done -- already closed once a0y.3 was pushed"),
says the planned step is done while the plan still lists it. "Commit the rest (already committed the
parser)" narrows it to a part and claims nothing against the plan.

Only claims count: a sentence that negates, plans or conditions ("not yet", "will", "if") claims
nothing done.
"""

from __future__ import annotations

import re

from projections.grounding.completions import NOT_DONE
from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.text import LIST_ITEM, STOP_WORDS, plan_sections, sentences, stem, word_stems

__all__ = ["CONTRADICTS_OWN_PLAN", "plan_regions", "own_plan"]

CONTRADICTS_OWN_PLAN = "contradicts-own-plan"

_I = re.IGNORECASE
# a lead-in whose items are still to do: "Still needs: a, b", "Still need to:", "Remaining: ..."
_LEAD_IN = lazy(r"\b(?:still\s+needs?(?:\s+to)?|still\s+to\s+do|left\s+to\s+do|remaining(?:\s+work|\s+steps?)?|to-?do|"
                r"next\s+steps?|not\s+(?:yet\s+)?done)\s*:", _I)
# a verb form that says something was done
_DONE_VERB = lazy(r"\b(?:\w{2,}ed|built|done|got|wrote|written|made|sent|ran|shipped|finished)\b", _I)
# verbs that report, name or intend rather than say work was done ("the user asked to ...", "an epic
# titled ...", "blocked by ...")
_NOT_WORK = frozenset("""asked requested titled named called labelled labeled wanted needed required expected
    planned scheduled blocked said mentioned described listed noted proposed suggested used based""".split())
_ALREADY = lazy(r"\balready\s+(\w{3,})\b([^\n,;.()—]*)", _I)
# what may follow "already <verb>ed" without narrowing it to a part of the item
_OPEN_AFTER = frozenset("""once after when while as in on at by with via through during before since and or
    too also earlier locally upstream yesterday today successfully""".split())
_QUOTED = lazy(r'"[^"\n]*"|“[^”\n]*”|`[^`\n]*`')
_SEPARATOR = lazy(r",\s+|;\s+|\s+[—–]\s+|\s+-\s+")


def plan_regions(text: str) -> list[tuple[int, int]]:
    """[start, end) of every part of ``text`` that lists work still to do: a section headed as a
    plan, the rest of a line after a lead-in ("Still needs: ..."), and the list items that follow a
    lead-in ending its line ("Still need to:")."""
    out = [(a, _label_line(text, a, b)) for a, b in plan_sections(text)]
    for m in _LEAD_IN.finditer(text):
        eol = text.find("\n", m.end())
        eol = len(text) if eol < 0 else eol
        if text[m.end() : eol].strip():
            out.append((m.end(), eol))
            continue
        end = eol
        while end < len(text):
            nxt = text.find("\n", end + 1)
            nxt = len(text) if nxt < 0 else nxt
            if not LIST_ITEM.match(text, end + 1).group(2):
                break
            end = nxt
        if end > eol:
            out.append((eol + 1, end))
    return out


# a line at the margin that opens with a label of its own ("CODE_STATE: src/stats.rs ...") starts
# another section: the plan above it ends there
_LABEL_LINE = lazy(r"^[A-Z][\w ]{1,30}:[ \t]+\S", re.MULTILINE)


def _label_line(text: str, a: int, b: int) -> int:
    m = _LABEL_LINE.search(text, a, b)
    return m.start() if m else b


def _items(text: str, regions: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """(offset, text) of each item of the plans: a line, or a part of it between commas."""
    out = []
    for a, b in regions:
        pos = a
        for line in text[a:b].split("\n"):
            start = 0
            for m in _SEPARATOR.finditer(line):
                out.append((pos + start, line[start : m.start()]))
                start = m.end()
            out.append((pos + start, line[start:]))
            pos += len(line) + 1
    return [(o, t) for o, t in out if t.strip()]


@rule("plan", (CONTRADICTS_OWN_PLAN,),
      "A summary does not claim done what its own plan lists as still to do: a claim holding every word "
      "that sets a plan item apart from the rest of the summary contradicts it.")
def check_own_plan(ev: Evidence) -> list[GroundingFinding]:
    return own_plan(ev.text)


def own_plan(text: str) -> list[GroundingFinding]:
    """A warning for each claim of done work that the summary's own plan lists as still to do."""
    regions = plan_regions(text)
    if not regions:
        return []
    items = [(o, t, word_stems(t), _lead(t)) for o, t in _items(text, regions)]
    out = _already_done(text, regions)
    outside = [(o, s, word_stems(s)) for o, s in sentences(text) if not any(a <= o < b for a, b in regions)]
    uses: dict[str, int] = {}
    for _, _, words in outside:
        for w in words:
            uses[w] = uses.get(w, 0) + 1
    for offset, sentence, words in outside:
        said = _QUOTED.sub(" ", sentence)  # a quoted title's words ("an epic titled "Unified ..."") are not its verbs
        if not any(m.group(0).lower() not in _NOT_WORK for m in _DONE_VERB.finditer(said)) or NOT_DONE.search(said):
            continue
        for _, item, item_words, lead in items:
            own = {w for w in item_words if uses.get(w, 0) == (1 if w in words else 0)}
            shared = item_words & words
            if own & words and own - {lead} <= words and len(shared) >= 2 and 2 * len(shared) > len(item_words):
                at = min(i for i in (_find_word(sentence, w) for w in own & words) if i >= 0)
                out.append(finding("plan", CONTRADICTS_OWN_PLAN, "warning", sentence.strip()[:200],
                                   f"the summary claims {sentence.strip()[:120]!r} done, but its own plan still lists "
                                   f"{item.strip()[:120]!r} as to do", offset=offset + at, category="plan"))
                break
    return out


_FIRST_WORD = lazy(r"[\W_]*([A-Za-z]+)")


def _lead(item: str) -> str:
    """The stem of an item's first word: the planned step's verb ("Write LiveView tests"), which a
    claim of it puts in another tense ("tests written"), so it does not tell the item apart."""
    m = _FIRST_WORD.match(item)
    return stem(m.group(1).lower()) if m else ""


def _find_word(sentence: str, word: str) -> int:
    m = re.search(rf"\b{re.escape(word)}", sentence, _I)
    return m.start() if m else -1


def _already_done(text: str, regions: list[tuple[int, int]]) -> list[GroundingFinding]:
    """Plan items that say their own planned step is already done ("Close ... -- already closed")."""
    out = []
    for a, b in regions:
        pos = a
        for line in text[a:b].split("\n"):
            for m in _ALREADY.finditer(line):
                verb, rest = m.group(1).lower(), m.group(2).split()
                if not _DONE_VERB.fullmatch(verb) or (rest and rest[0].lower() not in _OPEN_AFTER):
                    continue
                if NOT_DONE.search(line[max(0, m.start() - 12) : m.start()]):
                    continue  # "not already closed"
                planned = [w.lower() for w in re.findall(r"[A-Za-z]{3,}", line[: m.start()])]
                if any(verb.startswith(w[:-1] if w.endswith("e") else w) for w in planned if w not in STOP_WORDS):
                    out.append(finding("plan", CONTRADICTS_OWN_PLAN, "warning", m.group(0).strip(),
                                       f"the plan item {line.strip()[:120]!r} says its own step is already done while "
                                       "the summary still lists it as to do", offset=pos + m.start(), category="plan"))
            pos += len(line) + 1
    return out
