"""Escaping for the viewer's HTML: every string that comes from a session is hostile until escaped.

Imported transcripts hold arbitrary text: markup (``<script>``), quotes that would break out of an
attribute, and Unicode bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and friends) that make
a line read differently from what it says. ``esc`` (``engine.escaping``, shared with the HTML report)
escapes markup and quotes and shows every bidi control and other invisible character as a visible
``⟨U+202E⟩`` marker, so the page shows exactly the characters the log holds. ``script_json`` embeds
data in a ``<script type="application/json">`` element that no text can close.

Terminal output (a tool's colours, cursor moves) arrives with ANSI escape sequences: ``esc_text``
drops them before escaping (the sequence is a terminal's instruction, not text anyone reads), so
``\x1b[1mok\x1b[22m`` shows as ``ok``, not ``⟨U+001B⟩[1mok⟨U+001B⟩[22m``. A lone ESC that starts
no sequence is still shown as ``⟨U+001B⟩``.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from engine.escaping import BIDI_CONTROLS, esc

__all__ = ["ANSI", "BIDI_CONTROLS", "esc", "esc_text", "script_json", "strip_ansi"]

# CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ST) and the two-byte escapes (ESC + one of @-Z\\-_)
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, cursor moves, terminal titles)."""
    return ANSI.sub("", text) if "\x1b" in text or "\x9b" in text else text


def esc_text(text: str) -> str:
    """Span text for the page: ANSI sequences dropped, then ``esc``."""
    return esc(strip_ansi(text))

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
