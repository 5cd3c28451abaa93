"""One line saying what an event did, in two styles of one description: ``terse`` for the CLI's
``log`` (git-log style, span text clipped and escaped for a terminal) and ``prose`` for the viewer
(a sentence, counts with separators, no span text; the page escapes it)."""

from __future__ import annotations

from typing import Literal

from engine.escaping import printable
from engine.events import (
    Event,
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    SessionStarted,
)
from engine.spans import id_ranges
from engine.text_clip import clip

__all__ = ["describe"]

Style = Literal["terse", "prose"]


def _short(text: str, width: int) -> str:
    return clip(printable(" ".join(text.split())), width)


def describe(ev: Event, style: Style = "terse") -> str:
    """What ``ev`` did, in one line of the given style."""
    prose = style == "prose"
    if style not in ("terse", "prose"):
        raise ValueError(f"style must be 'terse' or 'prose', not {style!r}")
    t = type(ev)
    if t is SessionStarted:
        what = f"session {ev.name!r} started" + ("" if ev.strict else " (permissive)")
        if ev.forked_from is not None:
            what += f", forked at position {ev.fork_position}"
        return what
    if t is Observed:
        if prose:
            return f"observed {ev.span_id} ({ev.role}/{ev.kind}, {ev.tokens:,} tokens)"
        return f"{ev.span_id} {ev.role}/{ev.kind} {ev.tokens} tok  {_short(ev.text, 60)}"
    if t is Pruned:
        return f"pruned {ev.span_id}" if prose else f"{ev.span_id} pruned"
    if t is Rewritten:
        if prose:
            flag = f" — VIOLATION: generation {ev.generation}" if ev.violation else ""
            return f"rewrote {id_ranges(ev.inputs, ', ')} into {ev.span_id} ({ev.tokens:,} tokens){flag}"
        flag = f"  VIOLATION generation {ev.generation}" if ev.violation else ""
        return f"{ev.span_id} <- {id_ranges(ev.inputs)}  {_short(ev.text, 48)}{flag}"
    if t is Rederived:
        if prose:
            return f"re-derived {ev.span_id} from its originals {id_ranges(ev.sources, ', ')}"
        return f"{ev.span_id} re-derived from {id_ranges(ev.sources)}  {_short(ev.text, 40)}"
    if t is Restored:
        return f"restored {ev.span_id}" if prose else f"{ev.span_id} restored"
    if t is Expanded:
        if prose:
            return f"expanded {ev.span_id} into {id_ranges(ev.restored, ', ')}"
        return f"{ev.span_id} expanded -> {id_ranges(ev.restored)}"
    if t is RewriteRefused:
        if prose:
            return f"REFUSED {ev.command} of {id_ranges(ev.inputs, ', ')}"
        return f"REFUSED {ev.command} of {id_ranges(ev.inputs)}: {_short(ev.reason, 60)}"
    if t is Marked:
        return f"mark {ev.label!r}"
    return t.__name__
