"""A match is evidence only when chance would rarely make it.

A long session's sources state hundreds of figures: almost every count under a hundred occurs in
them somewhere, and some sum, difference or conversion of what they print lands on almost any
figure. A figure of a summary matched loosely -- its digits somewhere, without what it counts, or a
derivation the checker found by searching -- is evidence for THAT figure only when the same test
fails for its neighbours, the figures written with the same precision around it ("140" against 90,
100, ... 190; "4.6" against 4.1 ... 5.1). When more than one in ten of them would pass as well, the
match is what an invented figure gets by chance, and it grounds nothing. In a short session the
same test singles the figure out and is kept.

A figure stated with what it counts ("23 tests" where a source prints "23 tests") is the literal
itself and needs no such test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from projections.grounding.conversions import precision
from projections.grounding.specifics import Specific

__all__ = ["NEIGHBOURS", "CHANCE", "neighbours", "singles_out", "written_figure"]

NEIGHBOURS = 10  # figures probed around the written one
CHANCE = 0.1  # the share of them that may pass the same test and the match still count

_FIGURE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def written_figure(sp: Specific) -> tuple[float, int, float] | None:
    """(the figure as written, its decimals, its step: ``conversions.precision``) of a number or
    quantity, None without digits."""
    m = _FIGURE.search(sp.text)
    if m is None:
        return None
    digits = m.group(0).replace(",", "")
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    return float(digits), decimals, precision(m.group(0))


def _same_step(figure: float, decimals: int, step: float) -> bool:
    return bool(decimals) or precision(f"{figure:.0f}") == step


def neighbours(sp: Specific) -> Iterator[Specific]:
    """The figures around ``sp`` written with its precision, as specifics of its category (same
    position and noun, so that a test reads them where ``sp`` stands)."""
    got = written_figure(sp)
    if got is None or sp.category not in ("number", "quantity"):
        return
    written, decimals, step = got
    half = NEIGHBOURS // 2
    if sp.hedge in ("over", "under"):
        # "over 40" matches up to half as much again: its neighbours lie one such window apart
        others = [written * 1.5**k for k in range(-half, half + 1) if k]
    else:
        # figures of the same precision: "152" is probed against 147 ... 157 but not against 150,
        # which is written to tens and so matches more
        below = min(3 * half, int(round(written / step)) - 1)  # figures stay positive
        near = sorted((k for k in range(-below, 3 * NEIGHBOURS) if k and _same_step(written + k * step, decimals, step)),
                      key=lambda k: (abs(k), k))
        others = sorted(written + k * step for k in near[:NEIGHBOURS])
    m = _FIGURE.search(sp.text)
    for other in others:
        shown = f"{other:.{decimals}f}"
        text = sp.text[: m.start()] + shown + sp.text[m.end() :]
        if sp.category == "number":
            value = float(shown) if sp.value == written else sp.value * other / written
            yield sp._replace(text=text, value=float(value))
        else:
            dim, values = sp.value
            scale = other / written if written else 0.0
            yield sp._replace(text=text, value=(dim, tuple(v * scale for v in values)))


def singles_out(sp: Specific, test: Callable[[Specific], object]) -> bool:
    """Does ``test`` (which ``sp`` passes) fail for all but a chance share of ``sp``'s neighbours?
    A figure without digits to vary ("twenty minutes") is not probed: True."""
    allowed = int(NEIGHBOURS * CHANCE)
    passed = 0
    for probe in neighbours(sp):
        if test(probe):
            passed += 1
            if passed > allowed:
                return False
    return True
