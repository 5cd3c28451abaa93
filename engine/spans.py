"""A span: one unit of the context buffer, with its provenance."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

import msgspec

__all__ = ["Provenance", "Span", "ROLES", "KINDS", "OBSERVED_KINDS", "ordinal", "observed_id", "derived_id"]

ROLES = ("system", "user", "assistant", "tool")
# what an observation can be: a message, a tool call and its result, the model's own reasoning
# (``thinking``: shown as such, never sent back to a provider as text), or an item of a kind
# ctxledger does not model (``other``: kept verbatim in meta by the integration that saw it)
OBSERVED_KINDS = ("message", "tool_call", "tool_result", "thinking", "other")
KINDS = (*OBSERVED_KINDS, "summary")


class Provenance(str, Enum):
    """Where a span's text came from: the outside world, or a rewrite of observed spans."""

    OBSERVED = "observed"
    DERIVED = "derived"

    def __str__(self) -> str:
        return self.value


class Span(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One live unit of the buffer.

    ``sources`` are the observed span ids a derived span's text comes from (the bottom of the chain);
    ``source_positions`` are the log positions of those originals (where ``rederive`` reads them).
    ``position`` is the event that put this text here. Untracked by the garbage collector
    (``gc=False``): a span holds only scalars, tuples and a JSON-like dict, never a cycle.
    """

    id: str
    text: str
    role: str
    kind: str
    provenance: Provenance
    generation: int = 0
    sources: tuple[str, ...] = ()
    tokens: int = 0
    meta: dict[str, Any] = {}
    position: int = 0
    source_positions: tuple[int, ...] = ()
    order: int = 0  # buffer order: the observation number, or a derived span's earliest source's

    @property
    def observed(self) -> bool:
        return self.provenance is Provenance.OBSERVED

    @property
    def derived(self) -> bool:
        return self.provenance is Provenance.DERIVED


def ordinal(span_id: str) -> int:
    """``o17`` -> 17. Assumes a well-formed id."""
    return int(span_id[1:])


def observed_id(n: int) -> str:
    return f"o{n}"


def derived_id(n: int) -> str:
    return f"d{n}"


def id_ranges(span_ids: Iterable[str], sep: str = ",") -> str:
    """Span ids as runs: ``o2 o3 o4 o5 o7 o8 d1`` -> ``o2–o5,o7,o8,d1`` (observed first, then
    derived, each in order; three or more consecutive ids are written ``first–last``)."""
    parts: list[str] = []
    for prefix in ("o", "d"):
        nums = sorted({int(s[1:]) for s in span_ids if s[:1] == prefix and s[1:].isdigit()})
        i = 0
        while i < len(nums):
            j = i
            while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
                j += 1
            if j - i >= 2:
                parts.append(f"{prefix}{nums[i]}–{prefix}{nums[j]}")
            else:
                parts.extend(f"{prefix}{n}" for n in nums[i : j + 1])
            i = j + 1
    odd = [s for s in dict.fromkeys(span_ids) if not (s[:1] in ("o", "d") and s[1:].isdigit())]
    return sep.join(parts + odd)
