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
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations

from projections.grounding.chance import singles_out
from projections.grounding.specifics import SourceIndex, Specific, extract, parse_number

__all__ = ["MAX_FIGURES", "SUMMARY_FIGURES", "observation_arithmetic", "percentage_points", "summary_arithmetic"]

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
            for column in _columns(said, of_dim, lambda q, r=r: q.value[1][min(r, len(q.value[1]) - 1)]):
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


def _columns(text: str, figures: Sequence[Specific], value: Callable[[Specific], float]) -> list[list[float]]:
    """The columns of a table: the k-th ``value`` of ``figures`` on each line of ``text``, over two
    or more lines."""
    rows: list[list[float]] = []
    last_end = 0
    for q in figures:
        if not rows or text.count("\n", last_end, q.start):
            rows.append([])
        rows[-1].append(value(q))
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


SUMMARY_FIGURES = 24  # the summary's own figures nearest above a figure that may be its operands


def summary_arithmetic(sp: Specific, text: str, found: Sequence[Specific],
                       grounded: Callable[[Specific], bool] = lambda o: True) -> str:
    """How the figure ``sp`` is one step of arithmetic over two figures the summary itself states
    (``found``: the summary's specifics): "600,000 rows" and "190,000 more" give "790,000 rows
    backfilled", "412k -> 199k" gives "52% fewer", 790,000 done and 494,310 left give "62% done",
    "1,623 ms -> 212 ms" gives "7.7x faster", "34 lines across the three logs (14, 9 and 11)" and
    "Total 41,459" under the list it totals are totals. A summary that works with its own figures states
    nothing new -- when what it works with is grounded (``grounded``: an operand the sources support;
    otherwise three invented figures that add up would vouch for each other). Held to chance by the
    size of each window: a share, change, ratio, rate ("41.2M in 9h12m": "1,245/s"; "3 in 18,220":
    "1.6 per 10,000") or a restatement in another unit, which rounding makes loose, only over its
    own line and then with the nearest line above that states figures; a sum or difference exactly
    (unless hedged, "about 790,000") over the nearest figures above it; a total over the parts listed
    with it, or over a column of the Markdown table right above it. In each the figure must also be
    singled out from its neighbours (``chance``)."""
    got = _target(sp)
    if got is None or _step(sp.text, got[1]) is None:
        return ""
    end = text.find("\n", sp.start)
    end = len(text) if end < 0 else end
    stop = _SENTENCE_END.search(text, sp.end, end)
    end = stop.end() if stop else end  # a paragraph on one line: its figure's sentence ends here
    above = [o for o in found if o.start != sp.start and o.start < end and o.category in ("number", "quantity")
             and grounded(o)]
    own = text.rfind("\n", 0, sp.start) + 1
    windows = [("local", [o for o in above if o.start >= own])]
    windows.append(("local", [o for o in above if o.start >= _line_above(text, sp.start)]))
    per = _PER.match(text, sp.end)
    windows.append((f"rate:{per.group(1).replace(',', '') if per else ''}", windows[0][1]))
    windows.append((windows[-1][0], windows[1][1]))
    windows.append(("exact", above[-SUMMARY_FIGURES:]))
    # a share of a total the summary names anywhere above ("Total v1 traffic: 2,102,207 calls", then a
    # key's "1,843,302 | ~87.7%")
    totals = [o for o in above if o.start < own and _TOTAL_BEFORE.search(text, max(0, o.start - 30), o.start)]
    if totals and got[0] == "%":
        windows.append(("local", windows[0][1] + totals))
    # a figure in words counts the parts ("the three logs (14, 9 and 11)"), it is not one of them
    digits = [o for o in above if any(c.isdigit() for c in o.text)]
    # the parts a total adds up are listed before it on its line, or after it in its sentence ("34
    # lines across the three logs (14, 9 and 11)")
    windows.append(("total", [o for o in digits if own <= o.start < sp.start]))
    windows.append(("total", [o for o in digits if o.start > sp.start]))
    windows.append(("total", [o for o in digits if _list_above(text, own) <= o.start < own]))
    for how, operands in windows:
        figures = _by_dim(operands)
        said = _derive(sp, how, figures)
        if said and singles_out(sp, lambda p: _derive(p, how, figures)):
            return said
    columns = _table_columns_above(text, own, [o for o in digits if o.start < own])
    if columns and _column_total(sp, columns) and singles_out(sp, lambda p: _column_total(p, columns)):
        return "the total of a column of the table above it"
    return ""


def _table_columns_above(text: str, own: int, figures: Sequence[Specific]) -> list[list[float]]:
    """The columns of the Markdown table right above the line at ``own`` (a blank line between
    allowed): each row's figures, read left to right (``_columns``)."""
    end = own
    prev_end = text.rfind("\n", 0, max(end - 1, 0))
    if end > 0 and not text[prev_end + 1 : end - 1].strip():
        end = prev_end + 1  # one blank line between the table and the total
    start = end
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        if not text[prev : start - 1].lstrip().startswith("|"):
            break
        start = prev
    cells = [o for o in figures if start <= o.start < end and (t := _target(o)) is not None and t[0] != "%"]
    return _columns(text, cells, lambda o: _target(o)[1]) if start < end else []


def _column_total(sp: Specific, columns: list[list[float]]) -> bool:
    got = _target(sp)
    if got is None:
        return False
    step = _step(sp.text, got[1])
    if step is None:
        return False
    exact = step if sp.hedge else 1e-9 * max(abs(got[1]), 1.0)
    return any(_fits(sp, sum(col), got[1], exact) for col in columns if not _holds_its_total(col))


def _derive(sp: Specific, how: str, figures: dict[str, list[float]]) -> str:
    got = _target(sp)
    if got is None:
        return ""
    dim, v = got
    step = _step(sp.text, v)
    if step is None:
        return ""
    if how == "local":
        for pool_dim, pool in figures.items():
            for x, y in combinations(pool, 2):
                big, small = max(x, y), min(x, y)
                if dim == "%":
                    shares = (small / big, (big - small) / big, (big - small) / small, small / (big + small), big / (big + small))
                    if any(_fits(sp, 100 * c, v, step) for c in shares):
                        return "a share or change of two figures the summary states, as a percentage"
                elif dim == "" and _fits(sp, big / small, v, step):
                    return "the ratio of two figures the summary states"
                elif pool_dim == dim and (_fits(sp, big + small, v, step) or _fits(sp, big - small, v, step)):
                    return "the sum or difference of two figures the summary states together"
            if dim and pool_dim == dim and dim != "%" and any(_fits(sp, x, v, step) for x in pool):
                return "a figure the summary states beside it, in another unit"  # "about 19,800 s, or 5.5 h"
        return ""
    if dim == "%":
        return ""
    if how.startswith("rate:"):
        # a rate or a time from two figures of different kinds stated together: "41.2M in 9h12m" is
        # "1,245/s"; "77.2M left at 1,245/s" is "about 17 hours"; "3 crashes in 18,220 sessions" is
        # "1.6 per 10,000"
        scale = float(how[5:]) if how[5:] else 1.0
        flat = [x for pool in figures.values() for x in pool]
        for x, y in combinations(flat, 2):
            if any(_fits(sp, c, v, step) for c in (scale * x / y, scale * y / x, x * y)):
                return "a rate, a product or a quotient of two figures the summary states together"
        return ""
    exact = step if sp.hedge else 1e-9 * max(abs(v), 1.0)
    if how == "total":
        pool = figures.get(dim, [])
        if len(pool) >= 2 and _fits(sp, sum(pool), v, exact):
            return "the total of the figures the summary lists"
        return ""
    for x, y in combinations(figures.get(dim, []), 2):
        if _fits(sp, x + y, v, exact) or _fits(sp, abs(x - y), v, exact):
            return "the sum or difference of two figures the summary states"
    return ""


_TOTAL_BEFORE = re.compile(r"\b(?:total|overall|in all|altogether|sum)\b[^.\n]{0,25}$", re.I)
_PER = re.compile(r"\s*(?:per|/|in\s+every)\s+(\d{1,3}(?:,\d{3})+|\d+)\b", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])\s")


def _list_above(text: str, own: int) -> int:
    """Where the run of list items directly above the line starting at ``own`` starts (``own``
    itself when the line above is no list item): "Total 41,459" under the items it totals."""
    start = own
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        if not _LIST_ITEM.match(text, prev):
            break
        start = prev
    return start


def _line_above(text: str, offset: int) -> int:
    """Where the nearest line above the line at ``offset`` that states a figure starts (a blank
    line or a heading such as "Still open:" between them is skipped; 0 on the first line)."""
    start = text.rfind("\n", 0, offset) + 1
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        if any(c.isdigit() for c in text[prev : start - 1]):
            return prev
        start = prev
    return start


def _by_dim(specifics: Iterable[Specific]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for o in specifics:
        got = _target(o)
        if got is not None and got[0] != "%" and got[1] > 0:
            out.setdefault(got[0], []).append(got[1])
    return out


def _target(sp: Specific) -> tuple[str, float] | None:
    """(dimension, value) of a figure: "" for a plain number."""
    if sp.category == "number":
        return "", float(sp.value)
    if sp.category == "quantity":
        dim, values = sp.value
        return dim, float(values[0])
    return None


# "+0.30 pp", "+0.12 to +0.81 pp", "0.4 percentage points": a difference of two percentages
_PP_AFTER = re.compile(r"(?:\s*(?:to|-|–|…)\s*[-+−]?\d[\d.,]*)?\s*(?:pp|p\.p\.|percentage[ -]points?)\b", re.I)


def percentage_points(sp: Specific, text: str, found: Sequence[Specific], index: SourceIndex,
                      grounded: Callable[[Specific], bool] = lambda o: True) -> str:
    """How the figure ``sp``, written in percentage points, is the difference of two percentages
    the summary states together (its line and the lines of its paragraph or table above it), or
    of two that one source observation states, or a source's fraction read as points (0.0046 is
    "0.46 pp"); "" when it is none of these. Each percentage carries its own rounding, so the
    difference may be off by half a step of each (8.77% - 8.30% is "0.46 pp" to within 0.01)."""
    if sp.category != "number" or not _PP_AFTER.match(text, sp.end):
        return ""
    v = abs(float(sp.value))
    step = _step(sp.text.lstrip("+-−"), v)
    if step is None:
        return ""
    a = text.rfind("\n", 0, sp.start) + 1
    top = a
    for _ in range(12):  # the paragraph or table above: lines up to a blank one
        prev = text.rfind("\n", 0, top - 1) + 1 if top > 0 else 0
        if top == 0 or not text[prev : top - 1].strip():
            break
        top = prev
    end = text.find("\n", sp.end)
    end = len(text) if end < 0 else end
    own = [o for o in found if top <= o.start < end and o.start != sp.start and _is_percent(o) and grounded(o)]

    def neighbour(p: Specific) -> bool:
        pv = abs(float(p.value))
        return _points_between(pv, _step(p.text.lstrip("+-−"), pv) or step, own)

    if _points_between(v, step, own) and singles_out(sp, neighbour):
        return "the difference of two percentages the summary states, in percentage points"
    for group in index.per_text:
        pcts = [o for o in group if _is_percent(o)]
        if 2 <= len(pcts) <= MAX_FIGURES and _points_between(v, step, pcts):
            return "the difference of two percentages one observation states, in percentage points"
    if any(abs(100 * f - v) <= step / 2 + 1e-12 for f in index.bare_numbers if 0 < abs(f) < 1):
        return "a fraction a source prints, in percentage points"
    return ""


def _points_between(v: float, step: float, pool: Sequence[Specific]) -> bool:
    """Do two percentages of ``pool`` differ by ``v`` points, written to ``step``? Each percentage
    carries half a step of its own rounding."""
    for x, y in combinations(pool, 2):
        slack = step / 2 + ((_step(x.text, x.value[1][0]) or 0) + (_step(y.text, y.value[1][0]) or 0)) / 2
        if abs(abs(x.value[1][0] - y.value[1][0]) - v) <= slack + 1e-9 * max(v, 1.0):
            return True
    return False


def _is_percent(o: Specific) -> bool:
    return o.category == "quantity" and o.value[0] == "%"
