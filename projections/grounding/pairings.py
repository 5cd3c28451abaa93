"""Rule ``pairing``: a fact the summary gives a thing is not one the sources give to something else.

Every fact real, the pairing wrong: "billing-api returned 500" when billing-api returned 503 and
auth-service 500; "committed as 66e1a0a" on the task whose commit was dbe5100; "8 files changed,
368 insertions" when one commit printed 8 files and 502 insertions and another 5 files and 368.

Principle: the summary binds a thing X to a value v on one line (a list item, a sentence with its
parenthetical); the sources bind two specifics when one unit of evidence states them close together
(on one line or a few lines of one text, or one in a tool call and the other in its result: the
command and the output it printed, ``git commit -m msg`` and the hash it printed). It is a swap
only when the sources never bind X with v, bind X with another value w of v's kind, AND bind v with
another thing Y of X's kind (an IP address and a DNS name are not one kind of thing). Several figures of one result ("73 tests + 14 doctests", "8 files
changed, 368 insertions") are such a pairing too: figures with different nouns must come from one
run. Facts from different sources about the same subject (a migration's id in one, its backfill
count in another) are no swap: nothing there gives either of them another partner of the same kind.
A key written with its bare value (``{"proxy-read-timeout":"60"}``, ``ttl=300``) states the pairing
of the key with that figure in any unit the summary reads it in ("proxy-read-timeout (60s)").

An output is tied to the step that raised it (steps.py): a line that credits a quoted message to a
quoted command is a swap when that command ran, none of its runs printed the message, and a run of
another command of the same tool (or the harness's own output: a hook's) did.

A value is tied to the task whose work printed it (phase_pairs.py: "84 tests" printed while the
session worked on spotter-dov.1 is no count of dov.2's), and a place or a report to the file the tools
printed it for (reports.py: "57:13" printed for otel_trace_helpers.ex is no line of hooks_controller.ex).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from projections.grounding.chance import written_figure
from projections.grounding.evidence import Evidence
from projections.grounding.phase_pairs import PhaseIndex, phase_swaps, task_of_line
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.reports import Reports, misplaced_locations, misplaced_reports
from projections.grounding.specifics import SourceIndex, Specific, tokens
from projections.grounding.steps import Steps
from projections.grounding.text import LIST_ITEM, at_line_position, line_tree

__all__ = ["SWAPPED_PAIRING", "swapped_pairings"]

SWAPPED_PAIRING = "swapped-pairing"
# what names a thing or states a fact about one (a quotation or a bare word is neither)
_PAIRABLE = frozenset({"name", "identifier", "host", "number", "time", "version", "path", "hash",
                       "date", "quantity", "url", "email", "code"})
# what names a thing (2: a code is a ticket id or a constant's name), what is both a thing and a value
# (1: a commit hash is a task's value and its own diff's thing), what is a value (0: counts, times,
# versions)
_RANK = {"name": 2, "host": 2, "identifier": 2, "path": 2, "url": 2, "email": 2, "code": 2, "hash": 1}
# how far apart (in lines of one paragraph of one source text) two specifics still state one fact
# together: a commit's hash line and the files it created, a test run's timing and its counts
_NEAR_LINES = 12


@rule("pairing", (SWAPPED_PAIRING,),
      "A value the summary gives a thing is not one the sources give to another thing while giving this one another value.")
def check_pairings(ev: Evidence) -> list[GroundingFinding]:
    return swapped_pairings(ev)


def _pairable(sp: Specific) -> bool:
    """A specific that states a fact about the thing beside it. A small bare number (under 100,
    no noun: "complexity (10 > max 9)", "task 4") numbers or counts something the line does not
    name, so it is no fact about the thing named there. A small count with its noun ("12 tests",
    "8 files changed") is one, even where the literal rule calls it weak (a count the summarizer
    may have made): the pairing rule only looks at values the sources state."""
    if sp.category not in _PAIRABLE or sp.weak and not (sp.category == "number" and sp.noun):
        return False
    if sp.category == "number" and not sp.noun:
        try:
            return abs(float(sp.value)) >= 100
        except (TypeError, ValueError):
            return True
    return True


def _position(sp: Specific, text: str) -> bool:
    """A line position ("error at line 152", "L40", "x.ex:152") is no fact a thing has one of: a
    file has errors at many lines, so another line of the same file is no swap."""
    return sp.category == "number" and at_line_position(text, sp.start)


def _squash(text: str) -> str:
    return "".join(tokens(text))


def _singular(noun: str) -> str:
    return noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun


def _kind(sp: Specific) -> tuple:
    """What a value is a value of: its category, a number's noun ("tests", "insertions"), a
    quantity's dimension (a latency is no other value of a rate)."""
    if sp.category == "number":
        return ("number", _singular(sp.noun))
    if sp.category == "quantity":
        return ("quantity", sp.value[0])
    if sp.category == "host":
        # an address and a DNS name are things of different kinds: a zone serial printed beside a
        # name server's name is no fact about an IP address
        return ("host", "address" if _ADDRESS.match(str(sp.value)) else "name")
    return (sp.category,)


_ADDRESS = re.compile(r"\[?(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]*:[0-9a-f:]+)\]?(?::\d+)?$", re.IGNORECASE)


def _look_up(sp: Specific) -> object:
    """The key a source specific is filed under and a summary specific looked up by: a hash by its
    short form (7 characters), a path by its file name (a summary shortens the directories), a
    number by its noun and value, anything else by its value."""
    if sp.category == "hash":
        return ("hash", str(sp.value).lower()[:7])
    if sp.category == "path":
        parts = [p for p in str(sp.value).replace("\\", "/").split("/") if p]
        return ("path", parts[-1] if parts else "")
    if sp.category == "number":
        return ("number", _singular(sp.noun), sp.value)
    return (sp.category, sp.value)


def _matches(summary: Specific, source: Specific) -> bool:
    """The summary's specific names the source's (same key; a path may drop leading directories)."""
    if summary.category == "path":
        a = [p for p in str(summary.value).split("/") if p]
        b = [p for p in str(source.value).split("/") if p]
        return len(a) <= len(b) and b[len(b) - len(a):] == a
    return True


_NEWLINE = re.compile("\n")
_CLAUSE_CUT = re.compile(r"[,;:()\[\]—–]|\s(?:and|but|while|then|with|via|by|from|in|after|before)\s|\.\s")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


class _Sighting:
    __slots__ = ("unit", "text", "line", "para", "sp", "kind")

    def __init__(self, unit: int, text: int, line: int, para: int, sp: Specific, kind: tuple):
        self.unit, self.text, self.line, self.para, self.sp, self.kind = unit, text, line, para, sp, kind


def _source_kind(sp: Specific, text: str) -> tuple:
    """``_kind`` of a source specific; a number's "noun" that is the first directory of a path
    ("create mode 100644 test/x_test.exs") counts nothing."""
    kind = _kind(sp)
    if sp.category == "number" and sp.noun:
        k = text.find(sp.noun, sp.end)
        if k >= 0 and text[k + len(sp.noun) : k + len(sp.noun) + 1] in ("/", "."):
            return ("number", "")
    return kind


def _spots(found: list[Specific], text: str) -> list[tuple]:
    """(line, paragraph, specific, kind, key) of each pairable specific ``found`` in ``text``."""
    out = []
    newlines: list[int] | None = None
    for sp in found:
        if not _pairable(sp):
            continue
        if newlines is None:
            newlines = [m.start() for m in _NEWLINE.finditer(text)] if "\n" in text else []
            blanks = [m.start() for m in _BLANK_LINE.finditer(text)] if newlines else []
        out.append((bisect_left(newlines, sp.start), bisect_left(blanks, sp.start), sp, _source_kind(sp, text), _look_up(sp)))
    return out


class _Pairs:
    """Where the sources state each pairable specific, and what each unit states near it. Built once
    per source index (every summary checked against the same sources shares it)."""

    def __init__(self, ev: Evidence):
        index = ev.index
        self.calls = tuple(s.call for s in ev.sources)
        self.unit_of = ev.command_unit_of
        self.texts = index.texts
        self.by_key: dict[object, list[_Sighting]] = {}
        self.in_unit: dict[int, list[_Sighting]] = {}
        self._squashed: dict[int, str] = {}
        self.members: dict[int, tuple[int, ...]] = {}
        for i, u in enumerate(self.unit_of):
            self.members[u] = (*self.members.get(u, ()), i)
        placed: dict[tuple[int, str], list[tuple]] = {}  # a text read twice has its specifics in the same places
        for i, found in enumerate(index.per_text):
            text = index.texts[i]
            u = self.unit_of[i]
            spots = placed.get((id(found), text))
            if spots is None:
                spots = placed[(id(found), text)] = _spots(found, text)
            for line, para, sp, kind, key in spots:
                s = _Sighting(u, i, line, para, sp, kind)
                self.by_key.setdefault(key, []).append(s)
                self.in_unit.setdefault(u, []).append(s)
        self._ev_sources = ev.sources
        self._order = ev.conversation
        self._per_text = index.per_text
        self._steps: Steps | None = None
        self._phases: PhaseIndex | None = None
        self._reports: Reports | None = None
        for sightings in self.in_unit.values():
            sightings.sort(key=lambda s: (s.text, s.line))

    @property
    def steps(self) -> Steps:
        """The calls and what they printed, built on first need (a summary that quotes a command)."""
        if self._steps is None:
            src = self._ev_sources
            self._steps = Steps(self.texts, [s.role for s in src], list(self.calls),
                                [bool(s.harness) for s in src], self.unit_of)
        return self._steps

    @property
    def phases(self) -> PhaseIndex:
        """The tasks the session worked on and the counts it printed meanwhile, built on first need."""
        if self._phases is None:
            src = self._ev_sources
            self._phases = PhaseIndex(self.texts, [s.role for s in src], list(self.calls),
                                      [bool(s.harness) for s in src], self._order, self._per_text)
        return self._phases

    @property
    def reports(self) -> Reports:
        """The file:line locations the outputs print, built on first need."""
        if self._reports is None:
            src = self._ev_sources
            # every output the summarizer saw, the hook output delivered with the compaction call too
            self._reports = Reports(self.texts, [s.role for s in src], [bool(s.harness) for s in src], range(len(src)))
        return self._reports

    def sightings(self, sp: Specific) -> list[_Sighting]:
        found = self.by_key.get(_look_up(sp), [])
        return [s for s in found if _matches(sp, s.sp)] if sp.category == "path" else found

    def squashed(self, u: int, members: tuple[int, ...]) -> str:
        got = self._squashed.get(u)
        if got is None:
            got = self._squashed[u] = "\n".join(_squash(self.texts[i]) for i in members)
        return got

    def near(self, at: _Sighting, kind: tuple | None, members: tuple[int, ...]) -> list[_Sighting]:
        """Specifics of ``kind`` (None: of any kind) the unit of ``at`` binds to it: within a few
        lines of it in the same text, or anywhere in another text of the unit (a call and its result)."""
        out = []
        for s in self.in_unit.get(at.unit, ()):
            if kind is not None and s.kind != kind:
                continue
            if s.text != at.text and len(members) > 1:
                out.append(s)
            elif s.text == at.text and s.para == at.para and abs(s.line - at.line) <= _NEAR_LINES:
                out.append(s)
        return out


# the last few source indexes seen (a benchmark checks many summaries against one set of sources);
# SourceIndex has slots, so no weak reference: the entry holds the index it was built from
_CACHE: list[tuple[SourceIndex, _Pairs]] = []
_CACHE_SIZE = 4


def _pairs_of(ev: Evidence) -> _Pairs:
    calls = tuple(s.call for s in ev.sources)  # the units depend on the call ids
    for index, got in _CACHE:
        if index is ev.index and got.calls == calls:
            return got
    got = _Pairs(ev)
    _CACHE.insert(0, (ev.index, got))
    del _CACHE[_CACHE_SIZE:]
    return got


def swapped_pairings(ev: Evidence) -> list[GroundingFinding]:
    """Lines of the summary that bind a thing to a value the sources give to another thing."""
    if len(ev.units) < 2:
        return []  # one unit: every pairing is stated together in it
    found = sorted((sp for sp in ev.found if _pairable(sp) and not _position(sp, ev.text)), key=lambda sp: sp.start)
    pairs = _pairs_of(ev)
    starts = [sp.start for sp in found]
    seen: dict[int, list[_Sighting]] = {}
    out: list[GroundingFinding] = []
    lines = line_tree(ev.text)
    on_line: list[list[Specific]] = []
    for k, (a, b, _parent) in enumerate(lines):
        here = [sp for sp in found[bisect_left(starts, a):bisect_right(starts, b)] if sp.end <= b]
        for sp in here:
            if sp.start not in seen:
                seen[sp.start] = pairs.sightings(sp)
        on_line.append([sp for sp in here if seen[sp.start]])
    quotes = sorted((sp for sp in ev.found if sp.category in ("quote", "name") and not sp.weak), key=lambda sp: sp.start)
    quote_starts = [sp.start for sp in quotes]
    texts: list[str] | None = None  # each line's text, for the phase and report checks
    for k, (a, b, parent) in enumerate(lines):
        here = [sp for sp in quotes[bisect_left(quote_starts, a):bisect_right(quote_starts, b)] if sp.end <= b]
        step = _misplaced_output(here, on_line[k], pairs) if len(here) >= 2 else None
        if step is not None:
            c, e, w = step
            out.append(finding(
                "pairing", SWAPPED_PAIRING, "error", f"{c.text} … {e.text}",
                f"the summary ties {e.text!r} to {c.text!r}, but no run of {c.text!r} printed it; "
                f"{_clip(w)} did: facts may have been swapped",
                offset=c.start, category="step+output",
            ))
            continue
        above = on_line[parent] if parent >= 0 else []
        swap = _swapped(above + on_line[k], len(above), seen, pairs, ev)
        if swap is None:
            if texts is None:
                texts = [ev.text[x:y] for x, y, _ in lines]
                parents = [q for _, _, q in lines]
                every = sorted(ev.found, key=lambda sp: sp.start)
                every_starts = [sp.start for sp in every]
            here_all = [sp for sp in every[bisect_left(every_starts, a):bisect_right(every_starts, b)] if sp.end <= b]
            out += _phase_swaps(pairs, a, texts, parents, k, here_all) or _report_swaps(ev, pairs, a, b)
            continue
        x, v, w, y = swap
        later = max(x, v, key=lambda sp: sp.start)
        out.append(finding(
            "pairing", SWAPPED_PAIRING, "error", f"{x.text} … {v.text}",
            f"the summary pairs {x.text!r} with {v.text!r}, but the sources pair {x.text!r} "
            f"with {w.text!r} and {v.text!r} with {y.text!r}: facts may have been swapped",
            offset=later.start, category=f"{x.category}+{v.category}",
        ))
    return out


def _phase_swaps(pairs: _Pairs, a: int, texts: list[str], parents: list[int], k: int,
                 here: list[Specific]) -> list[GroundingFinding]:
    """Values line ``k`` (its specifics ``here``) gives its task (named on it or on a line it hangs
    from) that the session printed only while working on other tasks (phase_pairs.py)."""
    if not pairs.phases.phases.tasks:
        return []
    task = task_of_line(pairs.phases.phases, texts, parents, k)
    if task is None:
        return []
    return [finding(
        "pairing", SWAPPED_PAIRING, "error", f"{s.task} … {s.value}",
        f"the summary gives {s.value!r} to {s.task}, but the session printed it only while working on "
        f"{s.other}; the work on {s.task} printed {s.own}: facts may have been swapped",
        offset=s.offset, category="task+value",
    ) for s in phase_swaps(pairs.phases, task, texts[k], a, here)]


def _report_swaps(ev: Evidence, pairs: _Pairs, a: int, b: int) -> list[GroundingFinding]:
    """A location or a report the summary line [a, b) gives one file that the tools printed for
    another (reports.py)."""
    line = ev.text[a:b]
    if ":" not in line and "line" not in line.lower() and "." not in line:
        return []
    reports = pairs.reports
    if not reports.reports:
        return []
    out = [finding(
        "pairing", SWAPPED_PAIRING, "error", m.summary,
        f"the summary places {m.summary!r} in {m.file}, but the sources print {m.other} (and {m.own} for "
        f"{m.file}): facts may have been swapped", offset=m.offset, category="file+line",
    ) for m in misplaced_locations(reports, line, a)]
    return out or [finding(
        "pairing", SWAPPED_PAIRING, "error", m.summary,
        f"the summary gives {m.file} the report it describes, but the sources print that report for {m.other} "
        + (f"(and other reports for {m.own})" if m.own else f"(and none for {m.file})")
        + ": facts may have been swapped", offset=m.offset, category="file+report",
    ) for m in misplaced_reports(reports, line, a)]


def _clip(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def _misplaced_output(here: list[Specific], things: list[Specific], pairs: _Pairs) -> tuple[Specific, Specific, str] | None:
    """(command C, output E, the call that printed E) when a summary line ties E to C, C ran, its
    runs never printed E and a run of another command of the same tool (or the harness) did."""
    steps = pairs.steps
    commands = [sp for sp in here if sp.category == "quote" and steps.runs_of(sp.text.strip("`\"'"))]
    if not commands:
        return None
    for c in commands:
        runs = steps.runs_of(c.text.strip("`\"'"))
        if not runs & steps.answered:
            continue  # never got a result: nothing to compare with
        tools = {steps.tool.get(u, "") for u in runs}
        for e in here:
            if e is c or e.category != "quote" or " " not in e.text.strip("`\"' "):
                continue  # a printed message, not a word or a file name
            if any(e.start >= o.start and e.end <= o.end for o in commands):
                continue
            lo, hi = (c.end, e.start) if c.start < e.start else (e.end, c.start)
            if any(lo <= o.start and o.end <= hi for o in things if o.category != "quote" or o in commands):
                continue  # another step or thing stands between: E is about that one
            printed = steps.printed(e.text.strip("`\"'"))
            if not printed or printed & runs or steps.mentioned_in_call(e.text, runs):
                continue
            for u in sorted(printed):
                if u not in steps.command:
                    return c, e, "the harness"
                if steps.tool.get(u, "") in tools:
                    return c, e, steps.command[u]
    return None


def _together(x: Specific, units_v: set[int], pairs: _Pairs, ev: Evidence) -> bool:
    """Some unit that states v also mentions x (as a specific, or its words run together: "p99" in
    "p(99)=612.4ms")."""
    if x.category in ("number", "quantity"):
        return False
    need = _squash(x.text)
    if len(need) < 3:
        return False
    return any(need in pairs.squashed(u, pairs.members[u]) for u in units_v)


def _swapped(bound: list[Specific], first: int, seen: dict[int, list[_Sighting]], pairs: _Pairs,
             ev: Evidence) -> tuple[Specific, Specific, Specific, Specific] | None:
    """(thing X, value v, X's value w in the sources, v's thing Y in the sources) for the first pair
    of specifics on one summary line (v on it at ``first`` or later, X on it or on its parent line)
    that the sources pair otherwise."""
    pairs_in_order = [(i, j) for i in range(len(bound)) for j in range(max(i + 1, first), len(bound))]
    pairs_in_order.sort(key=lambda ij: bound[ij[0]].weak or bound[ij[1]].weak)  # a small count last
    for i, j in pairs_in_order:
        x, v = bound[i], bound[j]
        kx, kv = _kind(x), _kind(v)
        if not _thing_and_value(x, v) and not (i >= first and _two_things(x, v, ev.text)):
            continue
        if any(_kind(sp) == kx for sp in bound[i + 1 : j]):
            continue  # another thing of its kind stands between: the value is that one's
        if i >= first and _across_sentences(ev.text, x, v):
            continue  # a paragraph written on one line: a sentence binds its own facts, not the next one's
        sx, sv = seen[x.start], seen[v.start]
        units_x = {s.unit for s in sx}
        units_v = {s.unit for s in sv}
        shared = units_x & units_v
        # a listing's records weigh only against a clause that binds X to v directly ("resolved
        # opentelemetry_phoenix to 0.3.0"), not against a line listing records of its own
        direct = shared and not _CLAUSE_CUT.search(ev.text, min(x.end, v.end), max(x.start, v.start))
        listed = _listed_apart(x, v, sx, sv, shared, pairs) if direct else None
        if listed is not None:
            return x, v, listed[0].sp, listed[1].sp
        if shared or _together(x, units_v, pairs, ev) or _together(v, units_x, pairs, ev):
            continue  # stated together somewhere: no swap
        if v.category == "quantity" and any(_restates(v, o.sp) for s in sx for o in pairs.near(s, None, pairs.members[s.unit])):
            continue  # the sources give X v in another written form ("about 3 days" for a pod AGE of 3d2h)
        if v.category == "quantity" and _keyed(x, v, {m for u in units_x for m in pairs.members[u]}, ev):
            continue  # a key and its bare value ({"proxy-read-timeout":"60"} for "proxy-read-timeout (60s)")
        w = _partner(sx, kv, v, pairs, ev)  # X with another value of v's kind
        y = _partner(sv, kx, x, pairs, ev) if w is not None else None  # v with another thing of X's kind
        if w is not None and y is not None:
            return x, v, w.sp, y.sp
    return None


def _listed_apart(x: Specific, v: Specific, sx: list[_Sighting], sv: list[_Sighting], shared: set[int],
                  pairs: _Pairs) -> tuple[_Sighting, _Sighting] | None:
    """(X's value w, v's thing Y) when every unit that states both X and v lists them apart: each in
    a record of its own that gives it a partner of the other's kind. A record is the line
    (``opentelemetry_bandit 0.3.0`` above ``opentelemetry_phoenix 2.0.1``), or, for a line with no
    such partner, its paragraph (a "### opentelemetry_phoenix" heading over its "Latest Version:
    2.0.1"); a mention with a partner in neither is no record, and neither is a line or paragraph of
    several things or several values (which goes with which it does not show). A listing states one
    fact a record; a unit that puts X and v in one record binds them (None). So does a call and its
    result (the command's file and the count it printed), unless the result names X itself: then a
    call that names X among others (a survey) is a mention, and the result's records say what goes
    with what."""
    kx, kv = _kind(x), _kind(v)
    w = y = None
    for u in shared:
        texts = {s.text for s in sx if s.unit == u} & {s.text for s in sv if s.unit == u}
        if not texts:
            return None
        xs = [s for s in sx if s.unit == u and s.text in texts]
        vs = [s for s in sv if s.unit == u and s.text in texts]
        for s in xs:
            got = _record_partner(s, vs, kv, v, pairs)
            if got is _TOGETHER:
                return None
            w = w or got
        for s in vs:
            got = _record_partner(s, xs, kx, x, pairs)
            if got is _TOGETHER:
                return None
            y = y or got
    return (w, y) if w is not None and y is not None else None


_TOGETHER = object()


def _record_partner(s: _Sighting, other_side: list[_Sighting], kind: tuple, not_this: Specific,
                    pairs: _Pairs) -> object:
    """A partner of ``kind`` (not ``not_this``) in the record of ``s``; ``_TOGETHER`` when that record
    also holds the other specific (``other_side``); None when ``s`` is a bare mention."""
    unit = pairs.in_unit.get(s.unit, ())
    for same in (lambda o: o.line == s.line,
                 lambda o: o.para == s.para and abs(o.line - s.line) <= _NEAR_LINES):
        if any(o.text == s.text and same(o) for o in other_side):
            return _TOGETHER
        record = [o for o in unit if o.text == s.text and same(o)]
        partners = {_look_up(o.sp) for o in record if o.kind == kind}
        if partners:
            if len(partners) > 1 or any(o.kind == s.kind and _look_up(o.sp) != _look_up(s.sp) for o in record):
                return None  # a record of several things or values: which goes with which is not shown
            return next(o for o in record if o.kind == kind)
    return None


_SENTENCE_BREAK = re.compile(r"[.!?]\s+(?=[A-Z\"'`*])")  # a parenthesis after a sentence annotates it
_ANAPHOR = re.compile(r"\b(?:this|that|these|those|it|its|there|the\s+same)\b", re.I)


def _across_sentences(text: str, x: Specific, v: Specific) -> bool:
    """``x`` and ``v`` stand in different sentences of a prose line and the later one does not point
    back ("… in session_live_test.exs. All 18 tests in this file pass." still pairs them)."""
    line_start = text.rfind("\n", 0, min(x.start, v.start)) + 1
    if LIST_ITEM.match(text, line_start).group(2):
        return False  # a list item states its facts about its head ("11. **Implemented gqc.4**: … (commit bb53fb4)")
    a, b = min(x.end, v.end), max(x.start, v.start)
    breaks = list(_SENTENCE_BREAK.finditer(text, a, b))
    if not breaks:
        return False
    later = max(x, v, key=lambda sp: sp.start)
    stop = _SENTENCE_BREAK.search(text, later.end)
    return not _ANAPHOR.search(text, breaks[-1].end(), stop.start() + 1 if stop else len(text))


def _keyed(x: Specific, v: Specific, members: set[int], ev: Evidence) -> bool:
    """A text of X's units writes X as a key with v's figure as its bare value (``"x":"60"``,
    ``x: 60``, ``x=60``): the unit the summary adds reads the value, it states no other figure."""
    got = written_figure(v)
    if got is None or not got[0]:
        return False
    figure = got[0]
    digits = str(int(figure)) if figure == int(figure) else repr(figure)
    key = re.compile(re.escape(x.text.strip("`")) + r"[\"']?\s*[:=]\s*[\"']?" + re.escape(digits) + r"(?![\d.])", re.I)
    return any(key.search(ev.index.texts[m]) for m in members if m < len(ev.index.texts))


def _restates(v: Specific, other: Specific) -> bool:
    """A figure of the sources that ``v`` states rounded: a quantity of its dimension within half a
    written step of it (a whole step when ``v`` is hedged: "about 3 days" for 3d2h), or the bare
    figure it writes with a unit ("proxy-read-timeout: 60" as "60s")."""
    got = written_figure(v)
    if got is None or not got[0]:
        return False
    figure, _, step = got
    if other.category == "number":
        return other.value == figure
    if other.category != "quantity" or other.value[0] != v.value[0]:
        return False
    scale = v.value[1][0] / figure
    if not scale:
        return False
    half = step if v.hedge else step / 2
    return any(abs(value / scale - figure) <= half * (1 + 1e-9) for value in other.value[1])


def _two_things(x: Specific, v: Specific, text: str) -> bool:
    """Two things of different kinds in one clause ("Olga Ivanova owns SRE-5150", "INC-7788 tracks
    the payments-gateway errors"): the clause pairs them. Across clauses a line names things side
    by side without pairing them."""
    if _RANK.get(x.category, 0) != 2 or _RANK.get(v.category, 0) != 2 or x.category == v.category:
        return False
    return not _CLAUSE_CUT.search(text, x.end, v.start)


def _thing_and_value(x: Specific, v: Specific) -> bool:
    """``x`` names a thing and ``v``, after it, gives a fact about it ("spotter-fum.1 ... 231
    insertions", "committed as 461930e"); or both are figures of one result with different nouns
    ("8 files changed, 368 insertions"). A value before a thing ("502 at 22:21, then billing-api")
    belongs to the thing before it."""
    if x.category == v.category == "number":
        return bool(x.noun and v.noun) and _kind(x) != _kind(v)
    return _RANK.get(x.category, 0) > _RANK.get(v.category, 0)


def _partner(at: list[_Sighting], kind: tuple, not_this: Specific, pairs: _Pairs, ev: Evidence) -> _Sighting | None:
    want = _look_up(not_this)
    for s in at:
        for other in pairs.near(s, kind, pairs.members[s.unit]):
            if _look_up(other.sp) != want:
                return other
    return None
