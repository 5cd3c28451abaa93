"""Argument checks shared by every command: bad input becomes a typed error before anything is written."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec

from engine.errors import InvalidInputError
from engine.spans import KINDS, ROLES

MAX_TEXT_BYTES = 8 * 1024 * 1024
MAX_META_BYTES = 256 * 1024
MAX_LABEL_CHARS = 200
# How deep meta may nest (meta itself is level 1). Every reader decodes an event recursively (msgspec,
# the JSON export, the CLI inside click, the viewer inside an ASGI stack), each level costing a few
# frames of Python's recursion limit of 1,000; at 64 each of them has room to spare, so an accepted
# event is always readable.
MAX_META_DEPTH = 64

_msgpack = msgspec.msgpack.Encoder()
_json = msgspec.json.Encoder()


def text(value: Any, what: str = "text", *, max_bytes: int = MAX_TEXT_BYTES) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} is empty")
    if value.isascii():
        if len(value) > max_bytes:
            raise InvalidInputError(f"{what} is {len(value):,} bytes; the limit is {max_bytes:,} bytes")
        return value
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{what} is not valid Unicode text (lone surrogate at index {e.start})"
        ) from None
    if size > max_bytes:
        raise InvalidInputError(f"{what} is {size:,} bytes; the limit is {max_bytes:,} bytes")
    return value


def label(value: Any, what: str = "label") -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{what} is empty")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidInputError(f"{what} is {len(value)} characters; the limit is {MAX_LABEL_CHARS}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInputError(f"{what} contains control characters: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} is not valid Unicode text") from None
    return value


def optional_str(value: Any, what: str, *, limit: int = 10_000) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, not {type(value).__name__}")
    if len(value) > limit:
        raise InvalidInputError(f"{what} is {len(value)} characters; the limit is {limit}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"{what} is not valid Unicode text") from None
    return value


def role(value: Any) -> str:
    if value not in ROLES:
        raise InvalidInputError(f"role must be one of {', '.join(ROLES)}; got {value!r}")
    return value


def kind(value: Any, allowed: tuple[str, ...] = KINDS) -> str:
    if value not in allowed:
        raise InvalidInputError(f"kind must be one of {', '.join(allowed)}; got {value!r}")
    return value


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what the log's msgpack encoding can hold


def meta(value: Any) -> dict[str, Any]:
    if value.__class__ is dict and 0 < len(value) <= 8:
        # The common case, a few flat ASCII keys with finite JSON scalars (tool call ids): such a
        # dict round-trips through JSON unchanged, so it is copied instead.
        for k, v in value.items():
            if k.__class__ is not str or not k.isascii():
                break
            t = v.__class__
            if t is str:
                if len(v) > 4096 or not v.isascii():
                    break
            elif t is int:
                if not _INT_MIN <= v <= _INT_MAX:
                    break
            elif t is float:
                if v - v != 0:  # inf or nan
                    break
            elif t is not bool and v is not None:
                break
        else:
            return value.copy()
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"meta must be a dict, not {type(value).__name__}")
    if not value:
        return {}
    for key in value:
        if not isinstance(key, str):
            raise InvalidInputError(f"meta keys must be str; got {key!r}")
    try:
        encoded = _json.encode(value)
    except (TypeError, msgspec.EncodeError, UnicodeEncodeError) as e:
        raise InvalidInputError(f"meta must be JSON-serializable: {e}") from None
    except RecursionError:  # nested past what any reader could decode (or a cycle)
        raise InvalidInputError(f"meta nests too deep (or refers to itself); the limit is {MAX_META_DEPTH} levels") from None
    if len(encoded) > MAX_META_BYTES:
        raise InvalidInputError(f"meta is {len(encoded):,} bytes; the limit is {MAX_META_BYTES:,}")
    if encoded.count(b"[") + encoded.count(b"{") > MAX_META_DEPTH:  # else it cannot nest that deep
        depth = nesting(value, MAX_META_DEPTH)
        if depth > MAX_META_DEPTH:
            raise InvalidInputError(f"meta nests more than {MAX_META_DEPTH} levels deep; the limit is {MAX_META_DEPTH}")
    # Round-trip so what is stored is exactly what JSON export/import will reproduce.
    decoded = msgspec.json.decode(encoded)
    try:
        _msgpack.encode(decoded)
    except OverflowError:
        raise InvalidInputError(
            "meta holds an integer outside the 64-bit range the log can store; store it as a str"
        ) from None
    return decoded


def nesting(value: Any, limit: int) -> int:
    """How many containers deep ``value`` nests (a scalar is 0, ``{}`` is 1, a Struct counts as a
    container), counted without recursion; the walk stops once it passes ``limit`` and returns
    ``limit + 1``, so a hostile value costs at most ``limit`` levels of work per branch."""
    deepest = 0
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        obj, depth = pop()
        t = obj.__class__
        if t is dict:
            children = obj.values()
        elif t is list or t is tuple:
            children = obj
        elif isinstance(obj, msgspec.Struct):
            children = [getattr(obj, f) for f in obj.__struct_fields__]
        elif isinstance(obj, (dict, list, tuple)):
            children = obj.values() if isinstance(obj, dict) else obj
        else:
            continue
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return limit + 1
        for child in children:
            c = child.__class__
            if c is dict or c is list or c is tuple or isinstance(child, (dict, list, tuple, msgspec.Struct)):
                push((child, depth + 1))
    return deepest


def span_ids(value: Any, what: str = "span ids") -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    try:
        ids = tuple(value)
    except TypeError:
        raise InvalidInputError(f"{what} must be a list of span ids, not {type(value).__name__}") from None
    if not ids:
        raise InvalidInputError(f"{what}: at least one span is required")
    for span_id in ids:
        if not isinstance(span_id, str):
            raise InvalidInputError(f"{what}: span ids are str, not {type(span_id).__name__} ({span_id!r})")
    seen = set()
    for span_id in ids:
        if span_id in seen:
            raise InvalidInputError(f"{what}: {span_id} is given twice", span_id=span_id)
        seen.add(span_id)
    return ids


def tool_shape(role: str, kind: str, meta: dict[str, Any]) -> None:
    """The pairing contract: a tool_call is the assistant's and names its id and tool; a tool_result
    is the tool's and names the call it answers."""
    if kind == "tool_call":
        if role != "assistant":
            raise InvalidInputError(f"a tool_call is spoken by the assistant, not {role!r}")
        if not isinstance(meta.get("tool_call_id"), str) or not meta["tool_call_id"]:
            raise InvalidInputError("a tool_call needs meta['tool_call_id'] (a non-empty str)")
        if not isinstance(meta.get("name"), str) or not meta["name"]:
            raise InvalidInputError("a tool_call needs meta['name'], the tool's name")
    elif kind == "tool_result":
        if role != "tool":
            raise InvalidInputError(f"a tool_result has role 'tool', not {role!r}")
        if not isinstance(meta.get("tool_call_id"), str) or not meta["tool_call_id"]:
            raise InvalidInputError("a tool_result needs meta['tool_call_id'] naming its call")
    elif kind == "thinking" and role != "assistant":
        raise InvalidInputError(f"thinking is the assistant's reasoning, not {role!r}'s")
    elif role == "tool":
        raise InvalidInputError("role 'tool' is only for kind='tool_result'")


def moment(value: Any, what: str = "time") -> datetime:
    """An aware datetime from a datetime or an ISO 8601 string (``Z`` for UTC is accepted)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidInputError(f"{what} must be an ISO 8601 time, not {value[:60]!r}") from None
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{what} must be a datetime or an ISO 8601 string, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(f"{what} must carry a time zone (e.g. 2026-02-12T14:48:36Z), not {value.isoformat()!r}")
    return value.astimezone(timezone.utc)
