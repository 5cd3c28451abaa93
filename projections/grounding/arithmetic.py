"""Figures a summarizer computed from what one observation states together.

One principle: a quantity no source prints is the summarizer's arithmetic when it is the sum, the
difference or the total of quantities of its dimension that ONE source observation states (``1.21GB``
and ``312MB`` on one ``docker images`` listing give "900 MB smaller"; the three ``kB`` sizes of one
bundle report give "1.1 MB together"), the share or change of two of them as a percentage
(``1900 ms -> 1200 ms`` gives "37% faster"), or the time between two timestamps it prints
(``09:41:02`` and ``09:41:07`` give "five seconds later") -- equal to the precision the summary writes
the figure with. The figures the summary's own line states, where a source states them too, count as
one more observation ("42 ms over the 300 ms target" beside "p99 341.7 ms"); a table's column is
totalled (the sizes of one bundle listing, each on its line beside its gzip size). Only an observation with few quantities of that dimension counts
(``MAX_FIGURES``), and a column whose figures already hold their total is not added up: over a long listing almost any figure is the difference of some two others, and an
invented figure must stay an invention.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from itertools import combinations

from projections.grounding.specifics import SourceIndex, Specific, extract, parse_number

__all__ = ["MAX_FIGURES", "observation_arithmetic"]

MAX_FIGURES = 12  # more quantities of one dimension in one observation and a match could be chance

_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_WORD_FIGURE = re.compile(r"[A-Za-z]+")


def observation_arithmetic(sp: Specific, text: str, index: SourceIndex) -> str:
    """How the quantity ``sp`` of the summary ``text`` is arithmetic over one observation of
    ``index`` (or the summary's own line), or ""."""
    if sp.category != "quantity":
        return ""
    dim, values = sp.value
    step = _step(sp.text, values[0])
    if step is None:
        return ""
    for said, group in _observations(sp, text, index):
        how = _percent(sp, values, step, group) if dim == "%" else _combined(sp, dim, values, step, said, group)
        if how:
            return how
    return ""


def _observations(sp: Specific, text: str, index: SourceIndex) -> Iterable[tuple[str, Sequence[Specific]]]:
    a = text.rfind("\n", 0, sp.start) + 1
    b = text.find("\n", sp.start)
    line = text[a : b if b >= 0 else len(text)]
    # the summary's own figures count only where a source states them: it cites them
    yield line, [o for o in extract(line) if not (o.start + a == sp.start and o.text == sp.text) and index.supports(o)[0]]
    yield from zip(index.texts, index.per_text)


def _combined(sp: Specific, dim: str, values: tuple[float, ...], step: float, said: str, group: Sequence[Specific]) -> str:
    """A sum, difference or total of quantities of ``dim`` in ``group``, or a duration between two
    of its timestamps."""
    of_dim = [q for q in group if q.category == "quantity" and q.value[0] == dim]
    if 2 <= len(of_dim) <= MAX_FIGURES:
        for r, v in enumerate(values):
            figures = [q.value[1][min(r, len(q.value[1]) - 1)] for q in of_dim]
            for column in _columns(said, of_dim, r):
                if not _holds_its_total(column) and _fits(sp, sum(column), v, step * v / values[0]):
                    return "the total of a column of figures one observation states"
            for x, y in combinations(figures, 2):
                if _fits(sp, x + y, v, step * v / values[0]) or _fits(sp, abs(x - y), v, step * v / values[0]):
                    return "the sum or difference of two figures one observation states"
    if dim == "s":
        stamps = [t for t in map(_seconds, group) if t is not None]
        if 2 <= len(stamps) <= MAX_FIGURES:
            for (dx, x), (dy, y) in combinations(stamps, 2):
                if dx == dy and _fits(sp, abs(x - y), values[0], step):
                    return "the time between two timestamps one observation states"
    return ""


def _columns(text: str, quantities: Sequence[Specific], r: int) -> list[list[float]]:
    """The columns of a table: the k-th of ``quantities`` on each line of ``text``, over two or
    more lines."""
    rows: list[list[float]] = []
    last_end = 0
    for q in quantities:
        if not rows or text.count("\n", last_end, q.start):
            rows.append([])
        rows[-1].append(q.value[1][min(r, len(q.value[1]) - 1)])
        last_end = q.end
    if len(rows) < 2:
        return []
    width = max(map(len, rows))
    return [col for k in range(width) if len(col := [row[k] for row in rows if k < len(row)]) >= 2]


def _holds_its_total(figures: list[float]) -> bool:
    """One of the figures is the total of the others (a ``total`` row; "2.1 seconds (0.4s async,
    1.6s sync)"): adding them all counts the parts twice."""
    top = max(figures)
    return abs(2 * top - sum(figures)) <= 0.05 * top


def _percent(sp: Specific, values: tuple[float, ...], step: float, group: Sequence[Specific]) -> str:
    """A share or a change, as a percentage, of two quantities of one dimension in ``group``."""
    v = values[0]
    by_dim: dict[str, list[tuple[float, ...]]] = {}
    for q in group:
        if q.category == "quantity" and q.value[0] != "%":
            by_dim.setdefault(q.value[0], []).append(q.value[1])
    for quantities in by_dim.values():
        if not 2 <= len(quantities) <= MAX_FIGURES:
            continue
        for r in range(max(map(len, quantities))):
            figures = [q[min(r, len(q) - 1)] for q in quantities]
            for x, y in combinations(figures, 2):
                for whole, part in ((x, y), (y, x)):
                    if whole <= 0:
                        continue
                    if _fits(sp, 100 * part / whole, v, step):
                        return "a share of two figures one observation states, as a percentage"
                    if _fits(sp, 100 * abs(whole - part) / whole, v, step):
                        return "the change between two figures one observation states, as a percentage"
    return ""


def _fits(sp: Specific, computed: float, v: float, step: float) -> bool:
    """Is ``computed`` the figure ``v``, written to one unit ``step`` of its last digit? Rounded,
    or, when hedged "over"/"under", within one step on that side."""
    eps = 1e-9 * max(abs(v), 1.0)
    if sp.hedge == "over":
        return v - eps <= computed <= v + step + eps
    if sp.hedge == "under":
        return v - step - eps <= computed <= v + eps
    return abs(computed - v) <= step / 2 + eps


def _step(written: str, value: float) -> float | None:
    """One unit of the last digit the figure is written with, in the unit of ``value`` ("900 MB":
    100 MB; "1.1 MB": 0.1 MB; "five seconds": one second)."""
    m = _DIGITS.search(written)
    if m is None:  # a figure in words ("five seconds") is a whole number of its unit
        said = next((n for w in _WORD_FIGURE.findall(written) if (n := parse_number(w.lower()))), None)
        return value / said if said else None
    digits = m.group(0).replace(",", "")
    n = float(digits)
    if not n:
        return None
    if "." in digits:
        unit = 10.0 ** -len(digits.split(".", 1)[1])
    else:
        kept = digits.rstrip("0")
        unit = 10.0 ** (len(digits) - len(kept)) if kept else 1.0
    return unit * value / n


def _seconds(sp: Specific) -> tuple[int | None, float] | None:
    """A timestamp as (day, seconds into it); the day is None for a time without a date."""
    if sp.category != "time":
        return None
    date, (h, m, s) = sp.value
    clock = h * 3600 + m * 60 + (s or 0)
    if date is None:
        return None, float(clock)
    try:
        day = datetime.date(*date).toordinal()
    except ValueError:
        return None
    return 0, float(day * 86400 + clock)
