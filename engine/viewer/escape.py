"""Escaping for the viewer's HTML: every string that comes from a session is hostile until escaped.

Imported transcripts hold arbitrary text: markup (``<script>``), quotes that would break out of an
attribute, and Unicode bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and friends) that make
a line read differently from what it says. ``esc`` (shared with the HTML report, ``engine.report``)
escapes markup and quotes and shows every bidi control and other invisible character as a visible
``⟨U+202E⟩`` marker, so the page shows exactly the characters the log holds. ``script_json`` embeds
data in a ``<script type="application/json">`` element that no text can close.
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.report import BIDI_CONTROLS, esc

__all__ = ["BIDI_CONTROLS", "esc", "script_json"]

_json = msgspec.json.Encoder(enc_hook=str)


def script_json(obj: Any) -> str:
    """JSON for a ``<script type="application/json">`` element: ``<``, ``>`` and ``&`` escaped as
    ``\\u003c`` etc. so no string can end the element or open a comment."""
    return (
        _json.encode(obj).decode()
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
