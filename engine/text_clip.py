"""The one text clip: span text shown in a line of a table, a finding or a message, white space
collapsed and cut to a width with an ellipsis. (Escaping for a page or a terminal is
``engine.escaping``'s; the CLI's ``shorten`` is this clip of the escaped text.)"""

from __future__ import annotations

__all__ = ["clip"]


def clip(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters, white space collapsed."""
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 1] + "…"
