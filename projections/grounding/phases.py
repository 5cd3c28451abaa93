"""Which task a session was working on when it printed something: the phases of its work.

A session that works through tasks one at a time (claim spotter-a0y.2, edit, test, commit, close;
then claim spotter-a0y.3) prints each task's outcomes while its tool calls act on that task. A task
is an id made of a family's name and a number (``spotter-a0y.2``, ``SRE-5150``) of a family whose
members the tool calls name at least two of. A tool call that names tasks of a family in what it
does (its command, its arguments; not the file text it writes) starts their phase, which lasts
until a call names other tasks of that family: what the session printed in between it printed
while working on them.

Used by the ``pairing`` rule (a count the summary gives one task that a run printed while the
session worked on another) and the ``completion`` rule (work claimed for a task is shown only by
what the session did while working on it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["Phases", "action_of", "TASK_ID", "phases_of", "head_task"]

# a family's name, a separator, a number: "spotter-gqc.4", "SRE-5150" (not inside a path or a longer id)
TASK_ID = re.compile(r"(?<![\w.#/-])([A-Za-z][\w-]*?(?:\.[A-Za-z][\w-]*)*)([.-])(\d+)(?![\w/-]|\.\w)")

# the parts of a tool call's arguments that are text it writes into a file, not what it does
_WRITTEN = ("content", "old_string", "new_string", "old_str", "new_str", "file_text", "patch", "diff", "text")


def action_of(call: str) -> str:
    """A tool call ``Name({...json...})`` (or its bare JSON arguments) without the file text it writes (an edit that adds a
    ``curl`` line to a script runs no curl; a comment naming the next task does not work on it);
    any other call as it is."""
    bare = call.startswith("{") and call.endswith("}")  # the arguments alone: {"command": "str_replace", "path": …}
    open_at = -1 if bare else call.find("(")
    if not bare and (open_at <= 0 or not call.endswith(")") or call[open_at + 1 : open_at + 2] != "{"):
        return call
    try:
        args = json.loads(call if bare else call[open_at + 1 : -1])
    except ValueError:
        return call
    if not isinstance(args, dict):
        return call
    kept = {k: v for k, v in args.items() if k not in _WRITTEN}
    if bare:
        return json.dumps(kept, ensure_ascii=False) if len(kept) < len(args) else call
    return call[:open_at] + "(" + json.dumps(kept, ensure_ascii=False) + ")"


def _family(task: str) -> str:
    m = TASK_ID.fullmatch(task)
    return m.group(1) if m else task


def _ids(text: str) -> list[tuple[str, str]]:
    """(id, family) of each task-like id in ``text``."""
    return [(m.group(0), m.group(1)) for m in TASK_ID.finditer(text)]


class Phases:
    """For each source (by index), the tasks the session was working on when it was written."""

    def __init__(self, texts: Sequence[str], roles: Sequence[str], calls: Sequence[str], order: Sequence[int]):
        named: list[tuple[int, list[tuple[str, str]]]] = []
        members: dict[str, set[str]] = {}
        for i in order:
            if calls[i] and roles[i] == "assistant":
                found = _ids(action_of(texts[i]))
                if found:
                    named.append((i, found))
                    for task, family in found:
                        members.setdefault(family, set()).add(task)
        # a short form of a longer id ("Claim gqc.4" beside "bd update spotter-gqc.4") is that id
        full = {t for m in members.values() for t in m}
        canonical = {}
        for t in full:
            longer = [u for u in full if u != t and u.endswith(t) and u[-len(t) - 1] in "-_.#/"]
            canonical[t] = longer[0] if len(longer) == 1 else t
        named = [(i, [(canonical[t], _family(canonical[t])) for t, _ in found]) for i, found in named]
        members = {}
        for _, found in named:
            for task, family in found:
                members.setdefault(family, set()).add(task)
        families = {f for f, m in members.items() if len(m) >= 2}
        self.tasks: frozenset[str] = frozenset(t for f in families for t in members[f])
        self.family = {t: f for f in families for t in members[f]}
        self._at: list[frozenset[str]] = [frozenset()] * len(texts)
        self._worked: dict[str, list[int]] = {}  # task -> the source indexes written while working on it
        if not self.tasks:
            return
        starts = {i: found for i, found in named}
        current: dict[str, frozenset[str]] = {}
        for i in order:
            found = [(t, f) for t, f in starts.get(i, ()) if f in families]
            for f in {f for _, f in found}:
                current[f] = frozenset(t for t, g in found if g == f)
            now = frozenset(t for ts in current.values() for t in ts)
            self._at[i] = now
            for t in now:
                self._worked.setdefault(t, []).append(i)

    def at(self, i: int) -> frozenset[str]:
        """The tasks being worked on when source ``i`` was written (empty: none yet, or no tasks)."""
        return self._at[i]

    def worked(self, task: str) -> list[int]:
        """The source indexes written while the session worked on ``task``, in order."""
        return self._worked.get(task, [])

    def resolve(self, name: str) -> str | None:
        """The task a summary's ``name`` names: itself, or the one task it is the tail of ("gqc.4"
        names "spotter-gqc.4")."""
        if name in self.tasks:
            return name
        hits = [t for t in self.tasks if t.endswith(name) and t[-len(name) - 1] in "-_.#/"]
        return hits[0] if len(hits) == 1 else None

    def named_in(self, text: str) -> set[str]:
        """The tasks ``text`` names."""
        out = set()
        for m in TASK_ID.finditer(text):
            t = self.resolve(m.group(0))
            if t is not None:
                out.add(t)
        return out

    def siblings(self, a: str, b: str) -> bool:
        return a != b and self.family.get(a) is not None and self.family.get(a) == self.family.get(b)


# the last few source sets seen (a benchmark checks many summaries against one set of sources)
_CACHE: list[tuple[object, tuple[str, ...], Phases]] = []


def phases_of(ev) -> Phases:
    """The phases of ``ev``'s sources (an ``Evidence``), built once per set of sources."""
    calls = tuple(s.call for s in ev.sources)
    for index, seen, got in _CACHE:
        if index is ev.index and seen == calls:
            return got
    src = ev.sources
    got = Phases([s.text for s in src], [s.role for s in src], list(calls), ev.conversation)
    _CACHE.insert(0, (ev.index, calls, got))
    del _CACHE[4:]
    return got


# the head of a list item: what stands before its first ":", "(", " — " ("- **spotter-gqc.7** (open): ...")
_HEAD = re.compile(r"^[^:(\n—]{0,60}")


def head_ids(line: str) -> list[str]:
    """The task-like ids a line's head names ("- spotter-4te.4: Enable ..." names spotter-4te.4)."""
    m = _HEAD.match(line)
    return [t.group(0) for t in TASK_ID.finditer(m.group(0))] if m else []


def head_task(phases: Phases, line: str) -> str | None:
    """The one task a line's head names (the subject of a list item), if any."""
    m = _HEAD.match(line)
    named = phases.named_in(m.group(0)) if m else set()
    return next(iter(named)) if len(named) == 1 else None
