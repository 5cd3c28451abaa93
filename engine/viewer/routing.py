"""Session names in URLs: one path segment, percent-encoded, whatever the name holds.

A session may be named ``x/state``, ``x/diff`` or ``x/span/o1``. ``pages.url`` writes every name as
one segment (``/s/x%2Fstate``), but servers hand the app a path with ``%2F`` already decoded to
``/``, which cannot be told from the viewer's own sub-pages (``/s/x/state`` is session ``x``'s
state fragment). ``routed`` gives the router the raw path instead: under ``/s/`` and ``/api/s/``
the path the routes see keeps each segment percent-encoded, so a route's ``{name}`` is exactly one
segment and ``segment`` decodes it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from engine.errors import InvalidInputError

__all__ = ["routed", "segment"]

_PREFIXES = ("/s/", "/api/s/")


def segment(raw: str) -> str:
    """A route parameter (one raw path segment) as the text it encodes."""
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise InvalidInputError(f"the URL segment {raw!r} is not percent-encoded UTF-8") from None


def routed(scope: dict) -> dict:
    """``scope`` for the router: for session URLs, the path is the raw (still percent-encoded) path."""
    path = scope.get("path", "")
    if scope["type"] != "http" or not path.startswith(_PREFIXES):
        return scope
    raw = scope.get("raw_path")
    if raw is not None:
        return {**scope, "path": raw.decode("latin-1").split("?", 1)[0]}
    # a server without raw_path: encode what it gave, segment by segment
    return {**scope, "path": "/".join(quote(p, safe="") for p in path.split("/"))}
