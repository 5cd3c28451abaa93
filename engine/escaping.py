"""Span text is hostile until escaped, on a page and on a terminal alike: markup and quotes, control
characters (escape sequences included), the Unicode bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE
and friends) and the invisible characters that would make a line read differently from what the
log holds. One list of those characters, two outputs: ``esc`` for HTML (the report and the viewer)
shows each as a visible ``⟨U+XXXX⟩`` marker; ``printable`` for the terminal (the CLI) shows it as
a ``\\xNN`` / ``\\uNNNN`` escape. Neither is ever obeyed."""

from __future__ import annotations

import html
from typing import Any

__all__ = ["BIDI_CONTROLS", "INVISIBLE", "esc", "visible", "printable"]

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
INVISIBLE = "\u200b\u200c\u200d\u2028\u2029\ufeff"

_VISIBLE = {ord(c): f"\u27e8U+{ord(c):04X}\u27e9" for c in BIDI_CONTROLS}
for _c in (*range(0, 9), 11, 12, *range(14, 32), 127, *range(128, 160), *map(ord, INVISIBLE)):
    _VISIBLE.setdefault(_c, f"\u27e8U+{_c:04X}\u27e9")
_VISIBLE[13] = ""  # the CR of a CRLF: dropped, the LF stays

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0, 32), *range(127, 160))}
_CONTROL.update({ord(c): f"\\u{ord(c):04x}" for c in BIDI_CONTROLS + INVISIBLE})


def esc(text: Any) -> str:
    """``text`` as HTML text or attribute content: markup and quotes escaped, bidi controls and
    other invisible characters shown as ``⟨U+XXXX⟩``."""
    return html.escape(str(text), quote=True).translate(_VISIBLE)


def visible(text: str) -> str:
    """``text`` with bidi controls and invisible characters shown as ``⟨U+XXXX⟩`` and markup left
    as it is (for text a page escapes itself, such as JSON data it renders as text)."""
    return text.translate(_VISIBLE)


def printable(text: str) -> str:
    """Text fit for a terminal: control characters, bidi controls and invisible characters shown
    escaped, never interpreted."""
    return text.translate(_CONTROL)
