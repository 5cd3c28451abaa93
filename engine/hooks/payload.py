"""The JSON an agent CLI writes to a hook's stdin, read into one typed structure.

Claude Code (hooks reference, code.claude.com/docs/en/hooks): every event carries ``session_id``,
``transcript_path``, ``cwd`` and ``hook_event_name``; ``PreCompact`` and ``PostCompact`` add
``trigger`` (``manual`` | ``auto``), ``PreCompact`` also ``custom_instructions``, ``PostCompact``
the summary (``compact_summary``); ``SessionStart`` carries ``source`` (``startup`` | ``resume`` |
``clear`` | ``compact``). Codex (openai/codex PR #19905, #21272) sends the same names for the same
events, plus ``turn_id`` and ``model``. Unknown fields are ignored: both CLIs add fields over time.
"""

from __future__ import annotations

import msgspec

from engine.errors import InvalidInputError

__all__ = ["HookInput", "parse", "EVENTS"]

EVENTS = ("PreCompact", "PostCompact", "SessionStart")
MAX_PAYLOAD = 8 * 1024 * 1024  # a payload is a few hundred bytes, a summary a few dozen KB


class HookInput(msgspec.Struct, frozen=True, kw_only=True):
    hook_event_name: str
    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    trigger: str = ""
    source: str = ""
    compact_summary: str = ""
    custom_instructions: str = ""
    turn_id: str = ""
    model: str = ""


_decode = msgspec.json.Decoder(HookInput).decode


def parse(raw: bytes) -> HookInput:
    """The payload, or ``InvalidInputError`` saying in one line what is wrong with it."""
    if len(raw) > MAX_PAYLOAD:
        raise InvalidInputError(f"the hook payload is {len(raw):,} bytes; more than {MAX_PAYLOAD:,} is not a hook payload")
    if not raw.strip():
        raise InvalidInputError("the hook got no payload on stdin (expected the agent's JSON object)")
    try:
        payload = _decode(raw)
    except msgspec.ValidationError as e:
        raise InvalidInputError(f"the hook payload does not fit: {_one_line(e)}") from None
    except msgspec.DecodeError as e:
        raise InvalidInputError(f"the hook payload is not JSON: {_one_line(e)}") from None
    if payload.hook_event_name in ("PreCompact", "PostCompact") or (
        payload.hook_event_name == "SessionStart" and payload.source == "compact"
    ):
        if not payload.transcript_path:
            raise InvalidInputError(f"a {payload.hook_event_name} payload needs 'transcript_path'")
    return payload


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:200]
