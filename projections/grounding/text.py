"""How the rules cut a text: sentences (a Markdown list marker is not one), clauses, content words."""

from __future__ import annotations

import re

from engine.text_clip import clip
from projections.grounding.lazy import lazy
from projections.grounding.specifics import extract, tokens

__all__ = ["sentences", "clauses", "stem", "content_words", "clip", "STOP_WORDS", "at_line_position", "LIST_ITEM", "line_tree", "plan_sections", "word_stems"]

_SENTENCE = lazy(r"(?<=[.!?;])\s+|(?<=[.!?][\"”’)])\s+(?=[A-Z\"“])|\n+")
_CLAUSE = lazy(r";|,\s+(?:and|but|while|whereas)\s+|\s+(?:and|but|while|whereas|then)\s+|,\s+|:\s+")
# "2." or "-" alone: the marker of a list item, which belongs to the words after it
_MARKER_ONLY = lazy(r"\s*(?:\d{1,3}[.)]|[-*•]|#{1,6})\s*")
# what names a line position just before a figure: "at line 152", "lines 40-52", "L40", "x.ex:152"
_LINE_POSITION = lazy(r"(?:\blines?|\bL|\w:)\s*$", re.IGNORECASE)

STOP_WORDS = frozenset(
    """a an the of in on at to for by with from and or but is are was were be been being has have had
    it its this that these those as after before over under into onto up down out off than then so
    please can could would should will shall may might must do does did done not no yes just also
    only very more most some any all each both me my i we our us you your they them their he she his
    her him user users asked ask asks asking request requested requests wants wanted want instructed
    instruction instructions told tell said says say per explicitly like would about again still keep
    nothing anything everything something whatever whichever whoever what which who whom whose where when
    why how don doesn didn isn aren wasn weren won wouldn shouldn couldn""".split()
)


def sentences(text: str) -> list[tuple[int, str]]:
    """``(offset, sentence)`` for each non-empty sentence; a list item's number or bullet stays with
    the words it numbers ("1. Fixed the parser." is one sentence, not "1." and another)."""
    out: list[tuple[int, str]] = []
    pos = 0
    pending: int | None = None  # the offset of a marker waiting for its words
    for m in _SENTENCE.finditer(text):
        piece = text[pos : m.start()]
        if _MARKER_ONLY.fullmatch(piece) and "\n" not in m.group(0):
            pending = pos if pending is None else pending
        else:
            start = pos if pending is None else pending
            if text[start : m.start()].strip():
                out.append((start, text[start : m.start()]))
            pending = None
        pos = m.end()
    start = pos if pending is None else pending
    if text[start:].strip():
        out.append((start, text[start:]))
    return out


def clauses(sentence: str) -> list[tuple[int, str]]:
    """``(offset, clause)`` pairs of a sentence, cut at commas, semicolons, colons and conjunctions."""
    out, pos = [], 0
    for m in _CLAUSE.finditer(sentence):
        out.append((pos, sentence[pos : m.start()]))
        pos = m.end()
    out.append((pos, sentence[pos:]))
    return [(o, c) for o, c in out if c.strip()]


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def word_stems(text: str) -> set[str]:
    """The stems of a text's words of three letters or more, stop words and bare figures left out: what
    two texts must share to be about the same thing."""
    return {stem(t) for t in tokens(text) if len(t) >= 3 and t not in STOP_WORDS and not t.isdigit()}


def content_words(text: str) -> set[str]:
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
    return {stem(t) for t in tokens(" ".join(rest)) if t.isdigit() or (len(t) >= 2 and t not in STOP_WORDS)}



def at_line_position(text: str, start: int) -> bool:
    """The figure at ``start`` is a line position ("error at line 152", "L40", "x.ex:152"), not a
    count or a measure."""
    return _LINE_POSITION.search(text[max(0, start - 8) : start]) is not None or _LINE_HEADER.fullmatch(
        column_header(text, start)) is not None


_LINE_HEADER = lazy(r"(?:lines?|ln|l|line\s*(?:no\.?|#|number))", re.IGNORECASE)
_TABLE_RULE = lazy(r"\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*")


def column_header(text: str, at: int) -> str:
    """The header of the Markdown table column that holds ``text[at]`` (a cell is read with its
    column's name: "52" under "Line" is a line position), or "" outside a table."""
    a = text.rfind("\n", 0, at) + 1
    if not text.startswith("|", a) and not text[a:at].lstrip().startswith("|"):
        return ""
    column = text.count("|", a, at)
    end = a - 1  # walk the lines above, nearest first, to the table's rule line
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        if _TABLE_RULE.fullmatch(line):
            if start == 0:
                return ""
            cells = text[text.rfind("\n", 0, start - 1) + 1 : start - 1].split("|")
            return cells[column].strip().strip("*`").strip() if column < len(cells) else ""
        if "|" not in line:
            return ""
        end = start - 1
    return ""


# a line's indent and its list marker, if any
LIST_ITEM = re.compile(r"([ \t]*)((?:[-*•]|\d{1,3}[.)])[ \t]+)?")


def line_tree(text: str) -> list[tuple[int, int, int]]:
    """``(start, end, parent)`` of each line; ``parent`` is the line a list item hangs from (the
    nearest line above it indented less, or at the same indent but no list item: the heading of
    its list), -1 for none. A list item under "Task spotter-a0y.1" states its facts about it."""
    out: list[tuple[int, int, int]] = []
    levels: list[tuple[int, int]] = []  # (level, line) of the open ancestors, innermost last
    pos = 0
    for k, line in enumerate(text.split("\n")):
        parent = -1
        if line.strip():
            m = LIST_ITEM.match(line)
            level = 2 * len(m.group(1).expandtabs(4)) + (1 if m.group(2) else 0)
            while levels and levels[-1][0] >= level:
                levels.pop()
            parent = levels[-1][1] if levels else -1
            levels.append((level, k))
        out.append((pos, pos + len(line), parent))
        pos += len(line) + 1
    return out


_M = re.IGNORECASE | re.MULTILINE
# a heading whose items are plans, not outcomes ("Pending Tasks:", "## Next steps", "7. Remaining work")
_PLAN_WORDS = r"(?:pending|next|remaining|todo|to-do|plan(?:ned|s)?|outstanding|future|upcoming|optional)"
_PLAN_HEADING = lazy(
    rf"^[ \t]*(?:\d{{1,3}}[.)][ \t]*)?\**[^\n:*]{{0,40}}?\b{_PLAN_WORDS}\b[^\n:*]{{0,40}}?\**[ \t]*:\**[ \t]*$"
    rf"|^[ \t]*#{{1,6}}[ \t]+[^\n]{{0,40}}?\b{_PLAN_WORDS}\b[^\n]{{0,40}}$",
    _M,
)
_HEADING = lazy(r"^[ \t]*(?:#{1,6}[ \t]+[^\n]+|(?:\d{1,3}[.)][ \t]+)?\**[A-Z][^\n:]{0,60}\**:?\**[ \t]*:?)[ \t]*$", _M)


def plan_sections(text: str) -> list[tuple[int, int]]:
    """[start, end) of every section headed as a plan, up to the next heading."""
    headings = [(m.start(), m.end()) for m in _HEADING.finditer(text)]
    out = []
    for m in _PLAN_HEADING.finditer(text):
        following = [a for a, _ in headings if a > m.start()]
        out.append((m.end(), following[0] if following else len(text)))
    return out
