"""What the tools reported where: the ``file:line`` locations the sources print, each with its message.

A compiler, a linter, a type checker, a test run or ``grep -n`` states a place as ``path:line``
(``lib/x.ex:57:13``, ``└─ lib/x.ex:171:57: X.f/2``, ``[F] → lib/x.ex:152:14 Function body is
nested too deep``): the file and the line are stated together, and so are the place and the
message printed on its line or the line next to it. A summary that says where something was
reported pairs them too:

- a location: ``hooks_controller.ex:57:13``, or "error at line 171" on a line naming one reported
  file. A swap when the sources never print that file at that line, print that line (and column)
  for another file, and print the summary's file at other lines;
- a report: a summary line naming one reported file and describing a message ("Credo complexity
  (cyclomatic 10 > max 9) ... transcript_renderer.ex"). The message it describes is the one whose
  words it shares most (at least two, one of them a word, and no other message as many); a swap when
  every printing of that message is for other files (the summary's file has reports of its own, or
  none at all) and the line names no other file.

Used by the ``pairing`` rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from projections.grounding.specifics import tokens
from projections.grounding.text import STOP_WORDS, stem

__all__ = ["Reports", "Misplaced", "misplaced_locations", "misplaced_reports"]

# a file path (or name) with a line, and maybe a column, right after it
_LOCATION = re.compile(r"(?<![\w.-])((?:[\w.@-]+/)*([\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,4})):(\d+)(?::(\d+))?(?!\d)")
# a file's name, or a path ending in one
_FILE_NAME = re.compile(r"[\w./@-]*[\w-]\.[A-Za-z][A-Za-z0-9]{0,4}\b")
# "line 171", "lines 40-52", "L40": a line position the summary states without its file
_LINE_WORD = re.compile(r"\b(?:line|L)\s*(\d+)\b")


# what names a place, not what was reported there: a path or file name (with its line), a module
# or a function of one
_PLACE = re.compile(r"[\w.@-]*/[\w./@-]*[A-Za-z][\w./@-]*(?::\d+)*|[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b(?::\d+)*"
                    r"|\b[A-Z]\w*(?:\.[A-Za-z_]\w*[?!]?)+(?:/\d+)?|(?<![\w.-])[A-Za-z][\w-]*[.-]\d+(?:\.\d+)*\b")
# a figure standing alone ("complexity 13", "max 9", "`length/1`"), not a digit of an id or a version
_FIGURE = re.compile(r"(?<![\w.#-])\d+(?:\.\d+)?(?![\w-]|\.\d)")
_WORD = re.compile(r"[A-Za-z][A-Za-z_]+")


def _words(text: str) -> frozenset[str]:
    """The words (stems) and figures of a message, without the places it names."""
    text = _PLACE.sub(" ", text)
    words = {stem(t) for m in _WORD.finditer(text) for t in tokens(m.group(0)) if len(t) >= 3 and t not in STOP_WORDS}
    return frozenset(words | set(_FIGURE.findall(text)))


@dataclass(frozen=True)
class _Report:
    file: str  # the file's name (a summary shortens the directories)
    line: int
    col: int | None
    words: frozenset[str]  # the message's words, printed on the location's line or next to it


@dataclass(frozen=True)
class Misplaced:
    summary: str  # what the summary states
    offset: int
    file: str  # the summary's file
    other: str  # where the sources print it
    own: str  # what the sources print for the summary's file


class Reports:
    """The locations the outputs of a set of sources print (tool results, harness text)."""

    def __init__(self, texts, roles, harness, order):
        self.reports: list[_Report] = []
        for i in order:
            if roles[i] != "tool" and not harness[i]:
                continue
            text = texts[i]
            if ":" not in text:
                continue
            lines = text.split("\n")
            for k, line in enumerate(lines):
                for m in _LOCATION.finditer(line):
                    words = _words(line)
                    for j in (k - 1, k + 1):  # a message printed on the line above or below its place
                        if len(words) < 2 and 0 <= j < len(lines) and not _LOCATION.search(lines[j]):
                            words = words | _words(lines[j])
                    self.reports.append(_Report(m.group(2), int(m.group(3)), int(m.group(4)) if m.group(4) else None,
                                                words))
        self.files = {r.file for r in self.reports}
        self.by_file: dict[str, list[_Report]] = {}
        self.messages: dict[frozenset[str], set[str]] = {}  # each distinct message: the files it is printed for
        for r in self.reports:
            self.by_file.setdefault(r.file, []).append(r)
            self.messages.setdefault(r.words, set()).add(r.file)

    def files_in(self, text: str) -> list[tuple[str, int, int]]:
        """(file name, start, end) of each reported file ``text`` names (by its name or a path ending in it)."""
        return [(name, a, b) for name, a, b in file_names(text) if name in self.files]


def file_names(text: str) -> list[tuple[str, int, int]]:
    """(file name, start, end) of each file ``text`` names, by its name or a path ending in it."""
    return [(m.group(0).rstrip(".").rsplit("/", 1)[-1], m.start(), m.end()) for m in _FILE_NAME.finditer(text)]


def misplaced_locations(reports: Reports, line: str, start: int) -> list[Misplaced]:
    """Locations summary ``line`` states that the sources print for another file."""
    out = []
    named = reports.files_in(line)
    stated = [(m.group(2), int(m.group(3)), int(m.group(4)) if m.group(4) else None, m.start(3))
              for m in _LOCATION.finditer(line) if m.group(2) in reports.files]
    if len({f for f, _, _ in named}) == 1 and not stated:
        f, at = named[0][0], named[0][1]
        # reported where the later of the two stands (the value belongs to the thing before it)
        stated = [(f, int(m.group(1)), None, max(at, m.start(1))) for m in _LINE_WORD.finditer(line)]
    for f, n, col, at in stated:
        mine = reports.by_file.get(f, [])
        if any(r.line == n for r in mine):
            continue
        others = [r for r in reports.reports if r.file != f and r.line == n and (col is None or r.col == col)]
        if not others or not mine:
            continue
        where = f":{n}" + (f":{col}" if col is not None else "")
        out.append(Misplaced(f + where, start + at, f, others[0].file + where,
                             f"{f}:{mine[0].line}" + (f":{mine[0].col}" if mine[0].col is not None else "")))
    return out


def misplaced_reports(reports: Reports, line: str, start: int) -> list[Misplaced]:
    """A report summary ``line`` describes for one file that the sources print only for other files.
    The file may have no report at all: the tools printed that message for another file and never
    anything for this one."""
    named = file_names(line)
    if len({name for name, _, _ in named}) != 1:
        return []
    f, a, _ = named[0]
    mine = reports.by_file.get(f, [])
    words = _words(line)
    if not words:
        return []
    best, files, told = 0, set(), frozenset()
    for message, printed_for in reports.messages.items():
        shared = words & message
        figures = sum(w.isdigit() for w in shared)
        # a message is told by its figures and its words ("cyclomatic 10 > max 9", "`length/1`")
        score = len(shared) if figures and len(shared) > figures else 0
        if score > best:
            best, files, told = score, set(printed_for), message
        elif score == best:
            files |= printed_for
    if best < 2 or len(files) != 1 or f in files:
        return []  # no message told, or it is printed for several files, or for this one
    if not mine and (best < 3 or 2 * best < len(told)):
        # a file the tools never reported on: only a line that retells most of the message gives it
        # that report ("Added 6 OTEL dependencies to mix.exs" shares a figure and a word with an
        # Erlang warning, and tells none of it)
        return []
    return [Misplaced(line.strip()[:80], start + a, f, next(iter(files)), f"{f}:{mine[0].line}" if mine else "")]
