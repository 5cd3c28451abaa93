"""A count or a message the summary gives one task that the session printed while working on another.

A summary that tells a session's work task by task ("**Task spotter-dov.2** ... - renderer tests
went from 59 to 72") binds each figure on a task's line, or on a list item under it, to that task.
The sources bind a printed figure to the task the session was working on when it printed it
(phases.py): "84 tests, 0 failures" printed while working on spotter-dov.1 is dov.1's count. It is a
swap only when every printing of the value falls in the work of other tasks of the same family, and
the summary's task has values of that kind of its own (its runs printed 59 and 72 tests): a count of
tests is printed many times, but each printing belongs to one task's work. A message
(``fatal: pathspec ... is beyond a symbolic link``) is printed at one point of the session too:
credited to a task whose work printed other output but never it, it belongs to another.

The figure a change ends at is the task's own ("went from 72 to 84": 84); the one it started from
may have been printed by earlier work.

A commit hash is such a value too: the commit a tool printed while the session worked on gqc.4
(``[spotter-gqc ceff8c3] ...``) is gqc.4's, and "(pushed as ceff8c3)" on gqc.5, whose own work printed
bb53fb4, gives it to the wrong task. The left side of a push's range (``ceff8c3..bb53fb4``) is the
remote's tip before the push, printed by that push but no commit of its work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from projections.grounding.phases import Phases
from projections.grounding.specifics import Specific, tokens

__all__ = ["PhaseIndex", "PhaseSwap", "phase_swaps", "task_of_line"]

# "<noun> went from A to B": two values of the noun, B the one it ends at
_CHANGE = re.compile(r"\b([A-Za-z][\w-]*?s)\s+(?:went|go(?:es)?|grew|rose|increased|dropped|fell|decreased|jumped|climbed|moved)"
                     r"\s+from\s+(\d[\d,]*)\s+to\s+(\d[\d,]*)\b", re.I)
_HASH = "#hash"  # the kind of a commit hash among the values (counts have their noun, messages "")
_ELISION = re.compile(r"\s*(?:\.\.\.|…)\s*")


def _singular(noun: str) -> str:
    noun = noun.lower()
    return noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun


def _squash(text: str) -> str:
    return "".join(tokens(text))


def _pieces(message: str) -> list[str]:
    return [p for p in (_squash(part) for part in _ELISION.split(message)) if p]


@dataclass(frozen=True)
class PhaseSwap:
    task: str  # the summary's task
    value: str  # the value the summary gives it
    other: str  # the task whose work printed the value
    own: str  # a value of that kind the summary's task's work printed
    offset: int  # where the value stands in the summary


class PhaseIndex:
    """The sources' work phases and the counts each source printed, built once per set of sources."""

    def __init__(self, texts, roles, calls, harness, order, per_text):
        self.phases = Phases(texts, roles, calls, order)
        self.order = list(order)
        self.outputs = {i for i in order if roles[i] == "tool" or harness[i]}
        self.counts: dict[str, list[tuple[float, int]]] = {}  # noun -> (value, source index)
        self.hashes: list[tuple[str, int]] = []  # (short hash, output index) of the commits outputs print
        self.squashed: dict[int, str] = {}
        self.texts = texts
        if not self.phases.tasks:
            return
        for i in order:
            for sp in per_text[i]:
                if sp.category == "number" and sp.noun and not sp.weak:
                    self.counts.setdefault(_singular(sp.noun), []).append((sp.value, i))
                elif sp.category == "hash" and i in self.outputs and not texts[i].startswith("..", sp.end):
                    self.hashes.append((str(sp.value).lower()[:7], i))

    def squash_of(self, i: int) -> str:
        got = self.squashed.get(i)
        if got is None:
            got = self.squashed[i] = _squash(self.texts[i])
        return got

    def printed(self, message: str) -> list[int]:
        """The outputs that print ``message``'s words (each of its pieces, where "..." elides a part)."""
        pieces = _pieces(message)
        if sum(len(p) for p in pieces) < 12:
            return []
        return [i for i in sorted(self.outputs) if all(p in self.squash_of(i) for p in pieces)]


def task_of_line(phases: Phases, texts: list[str], parents: list[int], k: int) -> str | None:
    """The task summary line ``k`` is about: the one task it names, or else the one its nearest
    ancestor names (a list item under "**Task spotter-a0y.3**"). None when a line names two."""
    while k >= 0:
        named = phases.named_in(texts[k])
        if len(named) == 1:
            return next(iter(named))
        if named:
            return None
        k = parents[k]
    return None


def _values(line: str, start: int, found: list[Specific]) -> list[tuple[str, str, float | str, int]]:
    """(kind, text, value, offset) of the counts and printed messages a summary line states:
    a number with its noun ("73 tests"), the figure a change ends at ("tests went from 72 to 84"),
    a quoted message of several words."""
    out: list[tuple[str, str, float | str, int]] = []
    starts = set()
    for m in _CHANGE.finditer(line):
        starts.add(start + m.start(2))
        out.append((_singular(m.group(1)), f"{m.group(3)} {m.group(1)}", float(m.group(3).replace(",", "")), start + m.start(3)))
        starts.add(start + m.start(3))
    for sp in found:
        if sp.start in starts:
            continue
        if sp.category == "number" and sp.noun and not sp.weak:
            out.append((_singular(sp.noun), sp.text + " " + sp.noun, sp.value, sp.start))
        elif sp.category == "hash":
            out.append((_HASH, sp.text, str(sp.value).lower()[:7], sp.start))
        elif sp.category == "quote" and len(sp.text.strip("`\"'").split()) >= 3:
            out.append(("", sp.text, sp.text.strip("`\"'"), sp.start))
    return out


def phase_swaps(index: PhaseIndex, task: str, line: str, start: int, found: list[Specific]) -> list[PhaseSwap]:
    """The values summary ``line`` (at ``start``, with its specifics ``found``) gives ``task`` that
    the session printed only while working on other tasks of its family."""
    phases = index.phases
    mine = set(phases.worked(task))
    if not mine:
        return []
    out = []
    for kind, text, value, offset in _values(line, start, found):
        if kind == _HASH:
            where = [i for h, i in index.hashes if h == value]
        elif kind:
            where = [i for v, i in index.counts.get(kind, ()) if v == value]
        else:
            where = index.printed(str(value))
        if not where or any(task in phases.at(i) or not phases.at(i) for i in where):
            continue  # printed in this task's work, or before any task's: no swap
        if not kind and any(all(p in index.squash_of(i) for p in _pieces(str(value))) for i in mine):
            continue  # this task's work says it (in a call, in prose)
        others = sorted({t for i in where for t in phases.at(i) if phases.siblings(t, task)})
        if not others:
            continue
        if kind == _HASH:
            own_hashes = [h for h, i in index.hashes if i in mine and h != value]
            if not own_hashes:
                continue
            shown = f"commit {own_hashes[-1]}"
        elif kind:
            own = [v for v, i in index.counts.get(kind, ()) if i in mine and v != value]
            if not own:
                continue
            shown = f"{own[-1]:g} {kind}s"
        else:
            if not any(i in index.outputs and index.texts[i].strip() for i in mine):
                continue
            shown = "its own output"
        out.append(PhaseSwap(task, text, others[0], shown, offset))
    return out
