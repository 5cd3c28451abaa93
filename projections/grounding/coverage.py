"""Coverage: which specifics of the sources a derived text dropped (information, not an error:
summaries are meant to drop things; a reviewer wants to see what)."""

from __future__ import annotations

from projections.grounding.specifics import SourceIndex, Specific

__all__ = ["coverage"]


def coverage(text: str, index: SourceIndex, found: list[Specific] | None = None) -> tuple[int, list[str]]:
    """(distinct strong specifics in the sources, the ones ``text`` does not state)."""
    mine = SourceIndex.build([text], None if found is None else [found])
    total = 0
    dropped: list[str] = []
    seen: set[str] = set()
    for sp in index.specifics:
        if sp.weak or sp.category == "quote":
            continue
        if sp.key in seen:
            continue
        seen.add(sp.key)
        total += 1
        if not mine.supports(sp)[0]:
            dropped.append(sp.text)
    return total, dropped
