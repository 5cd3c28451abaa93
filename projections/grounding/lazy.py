"""Regular expressions compiled on first use.

The rules hold some 150 patterns; compiling them all costs more CPU than importing the rest of
ctxledger, and most processes (every CLI command that checks nothing, every hook that exits early)
never match one. ``lazy(pattern, flags)`` stands for ``re.compile(pattern, flags)``: the pattern is
compiled the first time one of its attributes is read, and each attribute read is then kept on the
object itself, so later calls (``rx.search``, ``rx.finditer``) cost what the compiled pattern's do.
It is not a ``re.Pattern``: pass it to no ``re.*`` function, call its methods.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern", "lazy"]


class LazyPattern:
    def __init__(self, pattern: str, flags: int = 0):
        self._source = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:  # only for attributes not yet kept
        if name.startswith("__"):
            raise AttributeError(name)
        rx = self._compiled
        if rx is None:
            rx = self._compiled = re.compile(*self._source)
        value = getattr(rx, name)
        setattr(self, name, value)  # found directly from now on: no call here
        return value

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r}, {self._source[1]})"


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    """``re.compile(pattern, flags)``, deferred to the first use."""
    return LazyPattern(pattern, flags)
