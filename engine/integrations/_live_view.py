"""What the framework adapters share: opening a named session, the live buffer as view entries with
every tool pair kept valid, and the one-line error for a missing extra.

The adapters give a framework back the LIVE buffer (whatever compaction left of it) in the
framework's own message shapes. Two promises come from ``engine.render`` and hold here too: a derived
span is marked as derived, and no tool call or tool result is ever handed over without its partner
(a pruned result becomes a placeholder naming the span to restore; a live result whose call is gone
becomes a plain message). The texts of those placeholders are ``render``'s own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from enum import Enum
from types import ModuleType
from typing import Any

import msgspec

from engine import validate
from engine.errors import DuplicateSessionError, InvalidInputError
from engine.ledger import Ledger
from engine.render import render
from engine.session import Session
from engine.spans import Span

__all__ = [
    "Entry",
    "Shown",
    "Observation",
    "require",
    "open_session",
    "live_view",
    "check_observations",
    "write_observations",
    "fits_meta",
    "to_json_text",
]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise a one-line ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{what} is not installed: pip install 'ctxledger[{extra}]'") from None


def open_session(ledger: Ledger, name: str) -> Session:
    """The session named ``name``, created when missing (so a restarted process resumes it)."""
    validate.label(name, "session name")
    if name in ledger:
        return ledger.session(name)
    try:
        return ledger.create_session(name)
    except DuplicateSessionError:  # another process created it between the two calls
        return ledger.session(name)


class Shown(Enum):
    """How one view entry shows its span."""

    SPAN = "span"  # the live span as it was recorded (an observation, or half of a whole pair)
    DERIVED = "derived"  # a derived span: a clearly marked message
    MISSING_RESULT = "missing-result"  # a placeholder result for a live call whose result is not live
    LONE_CALL = "lone-call"  # a live call shown as a plain message (its result is not live, and the
    #                          framework cannot take a placeholder result for this kind of call)
    LONE_RESULT = "lone-result"  # a live result whose call is not live: a plain message


class Entry(msgspec.Struct, frozen=True):
    shown: Shown
    span: Span
    text: str = ""  # the placeholder / plain-message text for the non-SPAN entries


_PLACEHOLDERS: dict[tuple, str] = {}


def _half_pair_text(session: Session, span: Span, derived_live: int) -> str:
    """``render``'s text for a half-live pair: for a call the placeholder of its result, for a result
    the plain message that names its missing call. Cached per span and per state of the derived spans
    (what the text can name), since finding the partner reads the log near the span."""
    key = (session.id, span.id, span.position, session.state.n_der, derived_live)
    text = _PLACEHOLDERS.get(key)
    if text is None:
        rendered = render([span], format="openai", reader=session)
        text = rendered[-1]["content"]
        if len(_PLACEHOLDERS) > 4096:
            _PLACEHOLDERS.clear()
        _PLACEHOLDERS[key] = text
    return text


def live_view(
    session: Session,
    *,
    same_turn: Callable[[Span, Span], bool] | None = None,
    can_placeholder: Callable[[Span], bool] | None = None,
    spans: Sequence[Span] | None = None,
) -> list[Entry]:
    """The live buffer in order, as entries that keep every tool pair valid.

    A run of consecutive tool calls (cut where ``same_turn(prev, span)`` says another assistant turn
    starts) is followed at once by its live results, in their recorded order, then by a placeholder
    result for each call whose result is not live (when ``can_placeholder(call)`` is False the call is
    shown as a plain message instead). A result pairs with the nearest earlier live, unanswered call
    of its id; a result without one is a plain message, in its place. In a log where results follow
    their calls directly (every framework's own history) nothing moves."""
    spans = session.spans() if spans is None else list(spans)
    answer_of: dict[int, int] = {}  # call index -> result index
    answered: set[int] = set()
    open_calls: dict[str, list[int]] = {}
    derived_live = 0
    for i, s in enumerate(spans):
        if not s.observed:
            derived_live += 1
            continue
        kind = s.kind
        if kind == "tool_call":
            open_calls.setdefault(s.meta["tool_call_id"], []).append(i)
        elif kind == "tool_result":
            waiting = open_calls.get(s.meta["tool_call_id"])
            if waiting:
                answer_of[waiting.pop()] = i
                answered.add(i)

    out: list[Entry] = []
    group: list[int] = []  # the current run of calls, by index

    def close_group() -> None:
        results = sorted(answer_of[k] for k in group if k in answer_of)
        out.extend(Entry(Shown.SPAN, spans[r]) for r in results)
        for k in group:
            if k not in answer_of:
                call = spans[k]
                out.append(Entry(Shown.MISSING_RESULT, call, _half_pair_text(session, call, derived_live)))
        group.clear()

    for i, s in enumerate(spans):
        is_call = s.observed and s.kind == "tool_call"
        if group and (not is_call or (same_turn is not None and not same_turn(spans[group[-1]], s))):
            close_group()
        if not s.observed:
            out.append(Entry(Shown.DERIVED, s))
        elif is_call:
            if i not in answer_of and can_placeholder is not None and not can_placeholder(s):
                out.append(Entry(Shown.LONE_CALL, s, _half_pair_text(session, s, derived_live)))
                continue
            group.append(i)
            out.append(Entry(Shown.SPAN, s))
        elif s.kind == "tool_result":
            if i not in answered:
                out.append(Entry(Shown.LONE_RESULT, s, _half_pair_text(session, s, derived_live)))
            # an answered result was shown right after its calls
        else:
            out.append(Entry(Shown.SPAN, s))
    close_group()
    return out


def fits_meta(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` is within the size limit a span's meta may have (when it encodes at all)."""
    try:
        return len(_encode(meta)) <= validate.MAX_META_BYTES
    except (TypeError, ValueError, msgspec.EncodeError, UnicodeEncodeError):
        return True  # not JSON at all: let validate.meta raise its typed error


_encode = msgspec.json.encode
_msgpack = msgspec.msgpack.encode


def to_json_text(value: Any, what: str) -> str:
    """``value`` as compact JSON text (the span text of an item kept whole as JSON)."""
    try:
        return _encode(value).decode()
    except UnicodeEncodeError as e:
        raise InvalidInputError(f"{what} is not valid Unicode text ({e.reason} at index {e.start})") from None
    except (TypeError, ValueError, msgspec.EncodeError) as e:
        raise InvalidInputError(f"{what} is not JSON-serializable: {e}") from None


Observation = tuple[str, str, str, dict[str, Any]]  # text, role, kind, meta


def check_observations(records: Sequence[Observation], what: Callable[[int], str]) -> list[Observation]:
    """Every record checked the way ``Session.observe`` will check it, before anything is written:
    a bad one raises its typed error naming the item, and nothing of the batch is written."""
    checked: list[Observation] = []
    for n, (text, role, kind, meta) in enumerate(records):
        try:
            validate.text(text)
            meta = validate.meta(meta)
            _msgpack(meta)  # JSON takes any int; the log's msgpack only 64-bit ones
        except InvalidInputError as e:
            raise InvalidInputError(f"{what(n)}: {e.message}; nothing was written") from None
        except (OverflowError, msgspec.EncodeError) as e:
            raise InvalidInputError(f"{what(n)}: a value cannot be stored ({e}); nothing was written") from None
        checked.append((text, role, kind, meta))
    return checked


def write_observations(session: Session, records: Sequence[Observation], by: str) -> list[Span]:
    """Observe every record in one transaction (the caller has checked them)."""
    spans: list[Span] = []
    with session.batch():
        for text, role, kind, meta in records:
            spans.append(session.observe(text, role=role, kind=kind, meta=meta, by=by))
    return spans

