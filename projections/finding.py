"""One thing the audit found (``projections.audit`` reports them; the hooks keep them between
PostCompact and SessionStart and read them back without loading the audit and its checker)."""

from __future__ import annotations

import msgspec

__all__ = ["Finding"]


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One thing the audit found. ``value`` is the offending text for grounding findings."""

    kind: str
    severity: str
    message: str
    span_ids: tuple[str, ...] = ()
    positions: tuple[int, ...] = ()
    value: str = ""
    category: str = ""
    checker: str = ""  # the drift checker that produced a grounding finding ("lexical", "llm:…", "nli:…")
