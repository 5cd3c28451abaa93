"""What a compaction dropped (``projections.lost``), computed once per summary and kept beside the
grounding results (``engine.grounding_cache``): ``ctxledger lost``, the viewer and the MCP tool read
the kept report of a summary instead of sorting the specifics of its sources again.

The report is a pure function of the summary's text and its sources' ids, texts, roles, kinds and
meta, and of the code of ``projections.lost`` and the specifics extractor it uses: the row's kind
names a hash of both modules' source (a change to either misses every old row) and its digest the
inputs (a row never answers for other inputs than its own).
"""

from __future__ import annotations

import hashlib
import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["lost_report", "lost_version"]

_ENC = msgspec.msgpack.Encoder()


@lru_cache(maxsize=1)
def lost_version() -> str:
    """A hash of the code the report comes from (``projections.lost`` and its extractor)."""
    h = hashlib.blake2b(digest_size=8)
    for name in ("projections.lost", "projections.grounding.specifics"):
        # import_module: the package binds the function ``lost`` over its module's name
        h.update(Path(importlib.import_module(name).__file__).read_bytes())
    return f"projections.lost@{h.hexdigest()}"


def _digest(summary: Any, sources: list[Any]) -> str:
    payload = _ENC.encode((summary.id, summary.text, [(s.id, s.text, s.role, s.kind, s.meta) for s in sources]))
    return hashlib.blake2b(payload, digest_size=20).hexdigest()


def lost_report(reader: Any, summary: Any, sources: list[Any] | None = None) -> Any:
    """``projections.lost.lost(summary, sources)`` (``sources`` default: the summary's originals
    read back from ``reader``), from the kept row when there is one."""
    from projections.lost import LostReport, lost

    if sources is None:
        sources = reader.originals(summary.id)
    cache = getattr(reader, "grounding_cache", None)
    if cache is None or not hasattr(cache, "kept"):
        return lost(summary, sources)
    try:
        digest = _digest(summary, sources)
    except (TypeError, ValueError, OverflowError):  # meta msgpack cannot encode: computed, not kept
        return lost(summary, sources)
    decoder = msgspec.msgpack.Decoder(LostReport)
    return cache.kept(reader.id, summary.id, summary.position, lost_version(), digest,
                      lambda: lost(summary, sources), _ENC.encode, decoder.decode)
