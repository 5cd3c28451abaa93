"""A figure restated or derived: a source figure rounded to the precision the summary writes it
with, or one step of arithmetic over two figures the sources state.

A summarizer rounds what it read ("151904376" rows becomes "152 million", "131.02 kB" becomes
"131 kB", each within a hundredth of the figure) and reads a bare figure in the unit its output means ("412316860416" from
``pg_total_relation_size`` is "384 GiB", "roughly 412 GB"; ``ttl: 300`` is "300 s"). One test covers
all of it: some figure a source states, read in the summary's unit, rounds to the written figure at
its last written digit ("about" says no more than that; "over" and "under" open one side).

A summarizer also computes ("7.3 times", "about 4.5% of the sessions", "107 GiB" for the
difference of two sizes in bytes, "15% above January"): one step of arithmetic -- a sum, a
difference, a ratio, a share or a change as a percentage -- over two figures the sources state
(``derived``). That search covers every pair of figures, so it is made only where the sources state
few (``PAIR_BUDGET``): over a long session almost any figure is one step from some pair.

Found by searching every figure of the sources, such a match is evidence only where it singles the
written figure out (``projections.grounding.chance``), so the caller probes it: in a short session
it grounds the figure, in a long one it grounds only what chance would not.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from projections.grounding.chance import written_figure
from projections.grounding.conversions import FINE, labelled_quantities, precision, reading
from projections.grounding.specifics import SourceIndex, Specific

__all__ = ["Figures", "PAIR_BUDGET", "cited_steps", "derived", "restated", "rounded_in_dimension"]

PAIR_BUDGET = 40  # distinct source figures beyond which one-step arithmetic is not searched

_BASE_UNIT_DIMS = ("s", "B", "$", "€", "£")  # a bare figure of these is often in the base unit


@dataclass(frozen=True, slots=True)
class Figures:
    """The figures of a set of sources, sorted for range queries: all of them, the bare ones, and
    each dimension's quantities in its base unit."""

    all: tuple[float, ...]
    bare: tuple[float, ...]
    by_dim: dict[str, tuple[float, ...]]
    steps: tuple[float, ...]  # one step of arithmetic over two figures, () past ``PAIR_BUDGET``

    @classmethod
    def of(cls, index: SourceIndex) -> Figures:
        every = sorted(index.numbers)
        by_dim = {d: set(v) for d, v in index.quantities.items()}
        for dim, value, *_ in labelled_quantities(index):  # timeout_ms: 30000, 500 * time.Millisecond
            by_dim.setdefault(dim, set()).add(value)
        return cls(tuple(every), tuple(sorted(index.bare_numbers)),
                   {d: tuple(sorted(v)) for d, v in by_dim.items()},
                   _one_step(every) if len(every) <= PAIR_BUDGET else ())


def _one_step(figures: list[float]) -> tuple[float, ...]:
    out: set[float] = set()
    for i, a in enumerate(figures):
        if 0 < a < 1:
            out.add(100 * a)  # a printed fraction as a score or percentage (0.71 as "71")
        for b in figures[i + 1 :]:
            out.update((a + b, b - a))
            for x, y in ((a, b), (b, a)):
                if y:
                    out.update((x / y, 100 * x / y, 100 * (x - y) / y))
    return tuple(sorted(v for v in out if v > 0))


def _any_in(values: tuple[float, ...], lo: float, hi: float) -> bool:
    i = bisect_left(values, lo)
    return i < len(values) and values[i] <= hi


def _window(written: float, step: float, hedge: str) -> tuple[float, float]:
    """The source values (in the summary's unit) that the written figure restates."""
    if hedge == "over":
        return written, written * 1.5 + step
    if hedge == "under":
        return written * 0.5 - step, written
    # "about 7.3", "roughly 400 MB": the hedge says the figure is rounded, to the digit it is
    # written to (trailing zeros included), like a plain figure
    return written - step / 2 * (1 + 1e-9), written + step / 2 * (1 + 1e-9)


def restated(sp: Specific, figures: Figures) -> bool:
    """Does a source figure, read in ``sp``'s unit, round to ``sp`` as written? Only a fine
    rounding counts here (half a written step within ``FINE`` of the figure: "152 million", not
    "2 minutes" for 101 s, which needs the source to name the same subject: ``conversions``)."""
    if sp.category == "number":
        step = precision(sp.text)
        got = written_figure(sp)
        if got is None or not got[0] or step / 2 > FINE * got[0]:
            return False
        written = got[0]
        scale = sp.value / written
        lo, hi = _window(written, step, sp.hedge)
        return _any_in(figures.all, lo * scale, hi * scale)
    if sp.category != "quantity":
        return False
    how = reading(sp)
    if how is None:
        return False
    written, step, factors = how
    if written and step > 1 and written == int(written) and 0.5 <= FINE * written:
        # "140 ms" may be written to the millisecond as well as to tens: a source's 139.7 ms rounds to
        # it at the finer reading, a window as narrow as any other fine one
        stated = figures.by_dim.get(sp.value[0], ())
        if any(_any_in(stated, (written - 0.5) * f, (written + 0.5) * f) for f in factors):
            return True
    if not written or step / 2 > FINE * written:
        return False
    if rounded_in_dimension(sp, figures, hedged=True):
        return True  # a quantity of the dimension, rounded ("131.02 kB" as "131 kB")
    dim = sp.value[0]
    lo, hi = _window(written, step, sp.hedge)
    if _any_in(figures.bare, lo, hi):
        return True  # a bare figure in the summary's unit ("ttl: 300" as "300 s")
    if dim in _BASE_UNIT_DIMS:
        for f in factors:
            if f != 1 and _any_in(figures.bare, lo * f, hi * f):
                return True  # a bare figure in the base unit ("412316860416" as "384 GiB")
    if dim == "%" and _any_in(figures.bare, lo / 100, hi / 100) and hi / 100 < 1:
        return True  # a printed fraction as a percentage (0.0031 as "0.31%")
    return False


def rounded_in_dimension(sp: Specific, figures: Figures, *, hedged: bool = False) -> bool:
    """Does a source state a quantity of ``sp``'s dimension that rounds to it as written, at any
    precision ("131 kB" for "131.02 kB", "1.2 s" for "1,187 ms")? That is the literal in another
    written form, so its match is not probed for chance (``literals``). ``hedged``: "over" and
    "under" open their side as well (a search, probed by the caller)."""
    how = reading(sp) if sp.category == "quantity" else None
    if how is None or not how[0]:
        return False
    written, step, factors = how
    lo, hi = _window(written, step, sp.hedge if hedged else "")
    stated = figures.by_dim.get(sp.value[0], ())
    return any(_any_in(stated, lo * f, hi * f) for f in factors)


_PARAGRAPH_FIGURE = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def cited_steps(text: str, sp: Specific) -> tuple[float, ...]:
    """One step of arithmetic over two figures the summary itself writes in ``sp``'s paragraph
    ("1,841 in 402,113 sessions ... 3 in 18,220": "about 46 per 10,000" is not one step, "4.5%" of
    the sessions is): operands the reader is shown, a search as small as the paragraph."""
    a = text.rfind("\n\n", 0, sp.start)
    b = text.find("\n\n", sp.end)
    a, b = (0 if a < 0 else a), (len(text) if b < 0 else b)
    figures = sorted({float(m.group(0).replace(",", "")) for m in _PARAGRAPH_FIGURE.finditer(text, a, b)
                      if not (m.start() < sp.end and sp.start < m.end())})
    return _one_step(figures) if len(figures) <= PAIR_BUDGET else ()


def derived(sp: Specific, figures: Figures, cited: tuple[float, ...] = ()) -> bool:
    """Is ``sp``, as written, one step of arithmetic over two figures the sources state (within
    the sources' budget), or over two its own paragraph writes (``cited``)?"""
    if sp.category not in ("number", "quantity"):
        return False
    return any(_derived_from(sp, steps) for steps in (cited, figures.steps) if steps)


def _derived_from(sp: Specific, steps: tuple[float, ...]) -> bool:
    got = written_figure(sp)
    if got is None or not got[0]:
        return False
    written, _decimals, _step = got
    lo, hi = _window(written, precision(sp.text), sp.hedge)
    if sp.category == "number":
        scale = sp.value / written
        return _any_in(steps, lo * scale, hi * scale)
    if _any_in(steps, lo, hi):
        return True  # in the units written ("7.3 times", "15%")
    how = reading(sp)
    if how is None:
        return False
    _w, _s, factors = how
    return any(_any_in(steps, lo * f, hi * f) for f in factors if f != 1)  # in the base unit
