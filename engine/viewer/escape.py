"""Escaping for the viewer's HTML: every string that comes from a session is hostile until escaped.

Imported transcripts hold arbitrary text: markup (``<script>``), quotes that would break out of an
attribute, and Unicode bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and friends) that make
a line read differently from what it says. ``esc`` escapes markup and quotes and shows every bidi
control (and every other invisible control character) as a visible ``⟨U+202E⟩`` marker, so the
page shows exactly the characters the log holds. ``script_json`` embeds data in a
``<script type="application/json">`` element that no text can close.
"""

from __future__ import annotations

import html
from typing import Any

import msgspec

__all__ = ["esc", "script_json", "BIDI_CONTROLS"]

# Explicit embeddings, overrides and isolates, and the implicit marks: all can reorder what is
# displayed around them.
BIDI_CONTROLS = (
    "\u061c\u200e\u200f"  # arabic letter mark, left-to-right / right-to-left marks
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings, pop, overrides
    "\u2066\u2067\u2068\u2069"  # isolates
)
_VISIBLE = {ord(c): f"\u27e8U+{ord(c):04X}\u27e9" for c in BIDI_CONTROLS}
# C0/C1 controls other than tab and newline, zero-width characters that hide text, and the line and
# paragraph separators: shown, never interpreted.
for _c in (*range(0, 9), 11, 12, *range(14, 32), 127, *range(128, 160), 0x200B, 0x200C, 0x200D, 0x2028, 0x2029, 0xFEFF):
    _VISIBLE.setdefault(_c, f"\u27e8U+{_c:04X}\u27e9")
_VISIBLE[13] = ""  # CR of CRLF: dropped, the LF stays

_json = msgspec.json.Encoder(enc_hook=str)


def esc(text: Any) -> str:
    """``text`` as HTML text or attribute content: markup and quotes escaped, invisible and
    direction-changing characters shown as ``⟨U+XXXX⟩``."""
    return html.escape(str(text), quote=True).translate(_VISIBLE)


def script_json(obj: Any) -> str:
    """JSON for a ``<script type="application/json">`` element: ``<``, ``>`` and ``&`` escaped as
    ``\\u003c`` etc. so no string can end the element or open a comment."""
    return (
        _json.encode(obj).decode()
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
