"""What a rule judges: one derived text, everything its summarizer saw, and the indexes over them
that every rule shares (each built once, on first use).

A tool call and its result are one unit of evidence: the command ``mix test test/x_test.exs`` and
its output ``15 tests, 0 failures`` state one fact together, so rules that ask "which source states
these two things together?" ask it of units, not of spans.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from projections.grounding.specifics import SourceIndex, Specific, extract

__all__ = ["Source", "Evidence", "as_sources", "source_of", "seen_sources", "DESCRIPTIVE_HARNESS"]

# Harness text that carries the user's own words: the commands the user typed (``/compact <instruction>``, ``!cmd``).
USER_HARNESS = frozenset({"command-name", "command-args", "command-message", "bash-input"})
# Harness text that tells the model what to do (the compaction prompt, the pointer after a summary,
# the caveat before a local command): it describes work, it is no evidence that anything was done.
DESCRIPTIVE_HARNESS = frozenset({"compaction-prompt", "compact-trailer", "local-command-caveat"})


# a harness that runs a command in the background prints the id its output is retrieved by
_BACKGROUND_ID = re.compile(r"\b(?:running in background|background) with ID:?\s*([A-Za-z0-9_-]{5,})", re.I)


@dataclass(frozen=True, slots=True)
class Source:
    """A source observation's text and who said it (``user``, ``assistant``, ``tool``, ``system``;
    empty when unknown). ``harness``: text a tool's harness wrote around the conversation (its tag,
    or True): it grounds, but a summary is not expected to keep its specifics. ``call``: the tool
    call id that joins a tool call to its result (one unit of evidence)."""

    text: str
    role: str = ""
    harness: bool | str = False
    call: str = ""

    @property
    def speaks_for_user(self) -> bool:
        """The user's voice: what the user wrote, and the commands the user typed. Not what a
        harness put in the user's turn (hook output, reminders, project context, the compaction
        prompt): a rule a hook injected, said to be the user's request, is the instruction a
        resumed agent would execute on nobody's word."""
        return self.role == "user" and (not self.harness or self.harness in USER_HARNESS)


def source_of(observed: Any) -> Source:
    """An observed span (or ``Observed`` event) as the rules read it: its text, role, harness tag
    and tool call id (which joins a call to its result)."""
    meta = observed.meta
    harness = meta.get("harness") or False
    call = meta.get("tool_call_id")
    return Source(observed.text, observed.role, harness if isinstance(harness, str) else bool(harness),
                  call if isinstance(call, str) else "")


def seen_sources(reader: Any, span: Any) -> list[Source]:
    """The observations a compaction kept live that its summarizer read (``meta["seen"]``: Codex
    keeps the recent user messages), as sources: the summary may state what they say."""
    from engine.errors import LedgerError

    seen = span.meta.get("seen")
    out = []
    for span_id in seen if isinstance(seen, list) else ():
        try:
            out.append(source_of(reader.original(span_id)))
        except (LedgerError, TypeError):
            continue
    return out


def as_sources(sources: Sequence[str | Source]) -> list[Source]:
    return [s if isinstance(s, Source) else Source(s) for s in sources]


class Evidence:
    """A derived ``text`` and its ``sources``, with the indexes the rules share."""

    def __init__(
        self,
        text: str,
        sources: Sequence[str | Source],
        *,
        index: SourceIndex | None = None,
        found: list[Specific] | None = None,
        lowercase_vocabulary: frozenset[str] | None = None,
    ):
        self.text = text
        self.sources = as_sources(sources)
        self.index = index if index is not None else SourceIndex.build([s.text for s in self.sources])
        self.found = found if found is not None else extract(text, lowercase_vocabulary=lowercase_vocabulary)
        self.roles_known = any(s.role for s in self.sources)

    @cached_property
    def units(self) -> list[tuple[int, ...]]:
        """Source indexes grouped into units of evidence: a tool call with its result(s), every
        other source alone, in order."""
        out: list[list[int]] = []
        open_calls: dict[str, list[int]] = {}
        for i, s in enumerate(self.sources):
            if s.call:
                unit = open_calls.get(s.call)
                if unit is not None:
                    unit.append(i)
                    continue
                unit = [i]
                open_calls[s.call] = unit
                out.append(unit)
            else:
                out.append([i])
        return [tuple(u) for u in out]

    @cached_property
    def unit_of(self) -> list[int]:
        """For each source index, the index of its unit."""
        owner = [0] * len(self.sources)
        for u, members in enumerate(self.units):
            for i in members:
                owner[i] = u
        return owner

    @cached_property
    def command_unit_of(self) -> list[int]:
        """``unit_of``, with a command run in the background joined to the call that retrieved its
        output (the later call that names the task id the first one's result printed): one command,
        one result, however many calls it took to read it."""
        owner = list(self.unit_of)
        started: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            if src.role == "tool":
                for m in _BACKGROUND_ID.finditer(src.text):
                    started.setdefault(m.group(1), owner[i])
            elif src.call and started:
                for task, u in started.items():
                    if task in src.text and owner[i] != u:
                        old = owner[i]
                        owner = [u if o == old else o for o in owner]
                        break
        return owner

    @cached_property
    def conversation(self) -> list[int]:
        """Indexes of the sources that are the conversation itself (not descriptive harness text)."""
        return [i for i, s in enumerate(self.sources) if s.harness not in DESCRIPTIVE_HARNESS]

    @cached_property
    def user_texts(self) -> list[str]:
        """What the user said (every source when no roles are known)."""
        if not self.roles_known:
            return [s.text for s in self.sources]
        return [s.text for s in self.sources if s.speaks_for_user]

    @cached_property
    def user_index(self) -> SourceIndex | None:
        texts = self.user_texts
        if not texts:
            return None
        index = self.index
        if not index.read_from([s.text for s in self.sources]):
            return SourceIndex.build(texts)  # an index of other texts was given: read these afresh
        # the user's sources, as the sources' index already read them
        return index.subset(i for i, s in enumerate(self.sources) if not self.roles_known or s.speaks_for_user)
