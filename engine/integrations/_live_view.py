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

_encode = msgspec.json.encode
_msgpack = msgspec.msgpack.encode

__all__ = [
    "Entry",
    "Shown",
    "Observation",
    "require",
    "open_session",
    "LiveView",
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


class _Pairs:
    """The outcome of pairing a stretch of the buffer: its entries, the ids of its calls left without a
    live result, whether it ends inside a run of calls."""

    __slots__ = ("entries", "open_ids", "ends_in_call")

    def __init__(self, entries: list[Entry], open_ids: set[str], ends_in_call: bool):
        self.entries = entries
        self.open_ids = open_ids
        self.ends_in_call = ends_in_call


def _pair(
    spans: Sequence[Span],
    half_text: Callable[[Span], str],
    same_turn: Callable[[Span, Span], bool] | None,
    can_placeholder: Callable[[Span], bool] | None,
) -> _Pairs:
    answer_of: dict[int, int] = {}  # call index -> result index
    answered: set[int] = set()
    open_calls: dict[str, list[int]] = {}
    for i, s in enumerate(spans):
        kind = s.kind
        if kind == "tool_call" and s.observed:
            open_calls.setdefault(s.meta["tool_call_id"], []).append(i)
        elif kind == "tool_result" and s.observed:
            waiting = open_calls.get(s.meta["tool_call_id"])
            if waiting:
                answer_of[waiting.pop()] = i
                answered.add(i)

    out: list[Entry] = []
    append = out.append
    group: list[int] = []  # the current run of calls, by index
    SPAN = Shown.SPAN

    def close_group() -> None:
        if len(group) == 1 and group[0] in answer_of:
            append(Entry(SPAN, spans[answer_of[group[0]]]))
        else:
            for r in sorted(answer_of[k] for k in group if k in answer_of):
                append(Entry(SPAN, spans[r]))
            for k in group:
                if k not in answer_of:
                    append(Entry(Shown.MISSING_RESULT, spans[k], half_text(spans[k])))
        group.clear()

    for i, s in enumerate(spans):
        kind = s.kind
        if kind == "message":  # the common case first: observed messages
            if group:
                close_group()
            append(Entry(SPAN if s.observed else Shown.DERIVED, s))
            continue
        if not s.observed:
            if group:
                close_group()
            append(Entry(Shown.DERIVED, s))
        elif kind == "tool_call":
            if group and same_turn is not None and not same_turn(spans[group[-1]], s):
                close_group()
            if i not in answer_of and can_placeholder is not None and not can_placeholder(s):
                if group:
                    close_group()
                append(Entry(Shown.LONE_CALL, s, half_text(s)))
                continue
            group.append(i)
            append(Entry(SPAN, s))
        else:
            if group:
                close_group()
            if kind == "tool_result" and i in answered:
                continue  # shown right after its calls
            if kind == "tool_result":
                append(Entry(Shown.LONE_RESULT, s, half_text(s)))
            else:
                append(Entry(SPAN, s))
    ends_in_call = bool(group)
    if group:
        close_group()
    open_ids = {cid for cid, waiting in open_calls.items() if waiting}
    return _Pairs(out, open_ids, ends_in_call)


class LiveView:
    """The live buffer of one session as entries that keep every tool pair valid.

    A run of consecutive tool calls (cut where ``same_turn(prev, span)`` says another assistant turn
    starts) is followed at once by its live results, in their recorded order, then by a placeholder
    result for each call whose result is not live (when ``can_placeholder(call)`` is False the call is
    shown as a plain message instead). A result pairs with the nearest earlier live, unanswered call
    of its id; a result without one is a plain message, in its place. In a log where results follow
    their calls directly (every framework's own history) nothing moves.

    The entries are kept between calls: when only observations were appended since (the common case:
    a framework adds a turn, then reads the history back), only the new spans are paired, unless one
    of them answers an older call or continues a run of calls. ``payload(entry)`` (optional) is
    computed once per entry and kept beside it."""

    def __init__(
        self,
        session: Session,
        *,
        same_turn: Callable[[Span, Span], bool] | None = None,
        can_placeholder: Callable[[Span], bool] | None = None,
        payload: Callable[[Entry], Any] | None = None,
    ):
        self.session = session
        self.same_turn = same_turn
        self.can_placeholder = can_placeholder
        self.payload = payload
        self._key: tuple | None = None
        self._pairs = _Pairs([], set(), False)
        self._payloads: list[Any] = []
        self._texts: dict[tuple, tuple[str, int | None]] = {}
        self._derived_live = 0  # which derived spans are live (a hash of their ids): what texts can name

    def entries(self) -> tuple[list[Entry], list[Any]]:
        """The entries and their payloads (do not modify the lists)."""
        session = self.session
        st = session.state
        key = (st.session_id, st.version, st.n_obs, st.n_der, len(st.live))
        old = self._key
        if key == old:
            return self._pairs.entries, self._payloads
        grown = key[2] - old[2] if old is not None and old[0] == key[0] and old[3] == key[3] else -1
        if grown > 0 and key[1] - old[1] == grown and key[4] - old[4] == grown and self._append(old[2], key[2]):
            self._key = key
            return self._pairs.entries, self._payloads
        spans = session.spans()
        self._derived_live = hash(tuple(s.id for s in spans if not s.observed))
        self._pairs = _pair(spans, self._half_text, self.same_turn, self.can_placeholder)
        self._payloads = [self.payload(e) for e in self._pairs.entries] if self.payload else []
        self._key = key
        return self._pairs.entries, self._payloads

    def _append(self, first_old: int, last_new: int) -> bool:
        """Pair only the observations after ``o{first_old}`` when they cannot change older entries."""
        live = self.session.state.live
        new = [live[f"o{n}"] for n in range(first_old + 1, last_new + 1)]
        pairs = self._pairs
        if pairs.ends_in_call and new[0].kind == "tool_call":
            return False
        if pairs.open_ids and any(s.kind == "tool_result" and s.meta["tool_call_id"] in pairs.open_ids for s in new):
            return False
        tail = _pair(new, self._half_text, self.same_turn, self.can_placeholder)
        if self.payload:
            self._payloads = self._payloads + [self.payload(e) for e in tail.entries]
        self._pairs = _Pairs(pairs.entries + tail.entries, pairs.open_ids | tail.open_ids, tail.ends_in_call)
        return True

    def _half_text(self, span: Span) -> str:
        """``render``'s text for a half-live pair: for a call the placeholder of its result, for a
        result the plain message naming its missing call. Kept per span and per state of the derived
        spans (what the text can name), since finding the partner reads the log near the span."""
        st = self.session.state
        key = (span.id, span.position, self._derived_live)
        hit = self._texts.get(key)
        # A call's result not found in the log may be observed later: that text holds while no
        # observation was appended. Every other text names a partner that is in the log for good.
        if hit is not None and (hit[1] is None or hit[1] == st.n_obs):
            return hit[0]
        text = render([span], format="openai", reader=self.session)[-1]["content"]
        if len(self._texts) > 4096:
            self._texts.clear()
        self._texts[key] = (text, st.n_obs if text.startswith("[no tool output recorded]") else None)
        return text


def live_view(
    session: Session,
    *,
    same_turn: Callable[[Span, Span], bool] | None = None,
    can_placeholder: Callable[[Span], bool] | None = None,
) -> list[Entry]:
    """The live buffer as entries (see ``LiveView``), computed afresh."""
    return LiveView(session, same_turn=same_turn, can_placeholder=can_placeholder).entries()[0]


def fits_meta(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` is within the size limit a span's meta may have (when it encodes at all)."""
    try:
        return len(_encode(meta)) <= validate.MAX_META_BYTES
    except (TypeError, ValueError, msgspec.EncodeError, UnicodeEncodeError):
        return True  # not JSON at all: let validate.meta raise its typed error



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

