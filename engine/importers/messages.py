"""The ``messages`` diff: what changed between two full message lists a client sent to a model.

An agent calling the OpenAI or Anthropic API re-sends its whole history on every call. Diffing each
request against what the session has recorded turns that stream into ledger commands:

- messages appended since the last call           -> observed spans (``by`` the client);
- messages the client dropped                      -> pruned (``by="client"``);
- ONE new message standing where two or more consecutive messages were dropped
                                                   -> a derived span of them (``by="client"``), so
  ``ctxledger audit`` judges the client's own summaries; a summary over an earlier summary is a
  rewrite of a derived span: refused (and recorded) in a strict session, a recorded violation of
  generation 2 in a permissive one;
- a single dropped message replaced by a new one   -> a prune and an observation.

A message becomes one span per part: text, each tool call (``kind="tool_call"`` with
``tool_call_id``/``name``/``arguments`` in ``meta``), each tool result (``kind="tool_result"``).
Every span carries ``meta["msg"]`` (a stable hash of its message's meaningful content, blind to
``cache_control``, thinking blocks and formatting), ``meta["part"]`` and ``meta["parts"]``: the
recorder rebuilds its view of the client's list from the session alone after a restart.

The buffer's order is the order of observation, so a new message can only be appended. When a
client inserts or replaces a message in the middle, the messages after it are re-observed (the
stale copies pruned), keeping the live buffer equal to the list the client sent.

Cost: a request that only appends is O(new messages) in Python; the unchanged prefix is compared by
hash (raw message bytes are hashed in C and mapped to their canonical hash through a cache).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Sequence
from hashlib import blake2b
from typing import Any, NamedTuple

import msgspec

from engine import validate
from engine.errors import ImportFormatError, InvalidInputError, LedgerError, RewritePolicyError, SpanNotLiveError

__all__ = [
    "APIS",
    "Message",
    "Part",
    "MessageRecorder",
    "RequestRecord",
    "canonical_message",
    "canonical_reply",
    "json_too_deep",
    "json_shallow",
    "reply_messages",
    "system_message",
]

APIS = ("openai", "anthropic", "responses")  # chat completions, Messages, the Responses API
COMPACTION = "compaction"  # a Part kind of its own: a provider's summary, recorded as a derived span
OPAQUE_TEXT = "[a compaction encrypted by the provider: its text cannot be read or checked]"
MAX_OPAQUE_META_CHARS = 64 * 1024  # larger encrypted_content is kept as a digest and a length
MAX_ARGUMENT_META_BYTES = 64 * 1024  # larger tool arguments live in the span text only
MAX_ARGUMENT_META_DEPTH = 16  # deeper tool arguments live in the span text only
MAX_MESSAGE_DEPTH = 64  # a message nested deeper than this is not recorded (it could not be read back)
_RAW_CACHE_LIMIT = 4096


class Part(NamedTuple):
    """One span's worth of a message."""

    role: str
    kind: str
    text: str
    meta: dict[str, Any]


class Message(NamedTuple):
    """A message reduced to what the ledger records, and the hash that identifies it."""

    role: str
    parts: tuple[Part, ...]
    hash: str

    @property
    def summary_candidate(self) -> bool:
        """One plain text part: the shape a client's summary of earlier turns takes."""
        return len(self.parts) == 1 and self.parts[0].kind == "message" and not self.parts[0].meta


class RequestRecord(msgspec.Struct, kw_only=True):
    """What one recorded request (or reply) changed in the session."""

    session: str
    messages: int = 0  # messages in the request that carry recordable content
    skipped: int = 0  # messages with nothing to record (empty, thinking only)
    observed: list[str] = []
    pruned: list[str] = []
    derived: list[str] = []  # spans written for the client's summaries
    violations: list[str] = []  # derived spans that summarize a summary (permissive sessions)
    refused: list[str] = []  # summaries the session refused; recorded as observations instead
    reobserved: int = 0  # messages re-observed because something was inserted before them
    position: int = 0  # the session's position afterwards


# -- canonical form ---------------------------------------------------------------------------


def _hash(role: str, parts: Sequence[Part]) -> str:
    # Thinking is recorded but does not identify a message: clients drop it from earlier turns.
    said = [p for p in parts if p.kind != "thinking"] or parts
    body = msgspec.json.encode([role, [[p.role, p.kind, p.text, p.meta] for p in said]], order="sorted")
    return blake2b(body, digest_size=12).hexdigest()


_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_too_deep(raw: bytes | str, limit: int = MAX_MESSAGE_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than ``limit`` (without decoding it: a
    decoder would recurse). Strings are skipped whole, so brackets inside them do not count."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if data.count(b"[") + data.count(b"{") <= limit:  # the common case: a count in C settles it
        return False
    depth = 0
    for m in _JSON_TOKENS.finditer(data):
        c = m.group()[0]
        if c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif c in (0x5D, 0x7D):
            depth -= 1
    return False


TOO_DEEP = b'"\\u0000ctxledger: nested too deep"'  # stands for a container cut away by json_shallow


def json_shallow(raw: bytes, limit: int) -> bytes:
    """``raw`` with every array or object nested deeper than ``limit`` replaced by the ``TOO_DEEP``
    string: JSON any decoder can read, for a body that is too deep to decode as it is. A message
    holding ``TOO_DEEP`` is recorded as a placeholder."""
    out, depth, cut, last = [], 0, -1, 0
    for m in _JSON_TOKENS.finditer(raw):
        c = raw[m.start()]
        if c in (0x5B, 0x7B):
            depth += 1
            if depth == limit + 1:
                cut = m.start()
        elif c in (0x5D, 0x7D):
            if depth == limit + 1 and cut >= 0:
                out += [raw[last:cut], TOO_DEEP]
                last, cut = m.end(), -1
            depth -= 1
    out.append(raw[last:])
    return b"".join(out)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether a decoded value nests lists and dicts deeper than ``limit`` (iteratively)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            items: Iterable[Any] = v.values()
        elif isinstance(v, (list, tuple)):
            items = v
        else:
            continue
        if depth > limit:
            return True
        stack.extend((x, depth + 1) for x in items)
    return False


def _placeholder(p: Part, reason: str, digest_of: str) -> Part:
    """What stands in the log for content that cannot be recorded: the reason, and a digest of what
    was sent (so the same content sent again is recognised as the same message)."""
    digest = blake2b(digest_of.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    return Part(p.role, p.kind, f"[not recorded by ctxledger: {reason}]", {**p.meta, "unrecorded": reason, "digest": digest})


def _message(role: str, parts: list[Part]) -> Message | None:
    """A message of these parts. Text that cannot be recorded (too large, not valid Unicode) becomes
    a placeholder part marked ``unrecorded``; ``canonical_message`` refuses it unless lenient."""
    if not parts:
        return None
    for i, p in enumerate(parts):  # checked before anything is written: a bad message leaves the log unchanged
        try:
            validate.text(p.text, f"a {p.kind} of the {role}")
        except InvalidInputError as e:
            parts[i] = _placeholder(p, e.message, p.text)
    return Message(role, tuple(parts), _hash(role, parts))


def _unrecorded(m: Message | None) -> str | None:
    if m is None:
        return None
    for p in m.parts:
        if "unrecorded" in p.meta:
            return p.meta["unrecorded"]
    return None


def _bad(message: str, index: int | None) -> ImportFormatError:
    where = f"message {index}: " if index is not None else ""
    return ImportFormatError(f"{where}{message}", line=index)


def _arguments(raw: Any) -> tuple[str, Any]:
    """Tool-call arguments as (canonical JSON text, value for meta)."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw, raw  # not JSON: kept verbatim
    if value is None:
        value = {}
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return text, value


def _tool_call(call_id: Any, name: Any, raw_args: Any, index: int | None) -> Part:
    if not isinstance(call_id, str) or not call_id:
        raise _bad("a tool call needs a non-empty string id", index)
    if not isinstance(name, str) or not name:
        raise _bad(f"tool call {call_id} needs a name", index)
    meta: dict[str, Any] = {"tool_call_id": call_id, "name": name}
    if (json_too_deep(raw_args) if isinstance(raw_args, str) else _deeper_than(raw_args, MAX_MESSAGE_DEPTH)):
        reason = f"tool call arguments nested deeper than {MAX_MESSAGE_DEPTH} levels"
        return _placeholder(Part("assistant", "tool_call", "", meta), reason, repr(raw_args)[:1_000_000])
    text, value = _arguments(raw_args)
    if len(text) <= MAX_ARGUMENT_META_BYTES and not _deeper_than(value, MAX_ARGUMENT_META_DEPTH):
        meta["arguments"] = value
    return Part("assistant", "tool_call", f"{name}({text})", meta)


def _text_of_blocks(content: Any, index: int | None) -> tuple[str, list[str]]:
    """Text of a content list (OpenAI parts or Anthropic blocks) and the non-text block types."""
    texts: list[str] = []
    other: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            raise _bad(f"a content block must be an object, not {type(block).__name__}", index)
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text", "refusal"):
            value = block.get("text", block.get("refusal"))
            if not isinstance(value, str):
                raise _bad(f"a {kind} block needs a string", index)
            texts.append(value)
        else:
            other.append(str(kind))
    return "\n".join(t for t in texts if t.strip()), other


def _text_parts(role: str, content: Any, index: int | None) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(role, "message", content, {})] if content.strip() else []
    if not isinstance(content, list):
        raise _bad(f"content must be a string or a list, not {type(content).__name__}", index)
    text, other = _text_of_blocks(content, index)
    parts = [Part(role, "message", text, {})] if text else []
    parts.extend(Part(role, "message", f"[{kind} omitted]", {"omitted": kind}) for kind in other)
    return parts


def _tool_result_text(content: Any, index: int | None) -> tuple[str, dict[str, Any]]:
    if content is None:
        content = ""
    if isinstance(content, list):
        text, other = _text_of_blocks(content, index)
        if other:
            text = "\n".join([text, *(f"[{kind} omitted]" for kind in other)]).strip()
    elif isinstance(content, str):
        text = content
    else:
        raise _bad(f"tool result content must be a string or a list, not {type(content).__name__}", index)
    if not text.strip():
        return "[empty tool output]", {"empty": True}
    return text, {}


def _openai(message: dict[str, Any], index: int | None) -> Message | None:
    role = message.get("role")
    content = message.get("content")
    if role in ("system", "developer"):
        parts = _text_parts("system", content, index)
        if role == "developer":
            parts = [p._replace(meta={**p.meta, "developer": True}) for p in parts]
        return _message("system", parts)
    if role == "user":
        return _message("user", _text_parts("user", content, index))
    if role == "assistant":
        parts = _text_parts("assistant", content, index)
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise _bad("tool_calls must be a list", index)
        for call in calls:
            if not isinstance(call, dict):
                raise _bad("a tool call must be an object", index)
            fn = call.get("function") or {}
            if not isinstance(fn, dict):
                raise _bad("a tool call's function must be an object", index)
            parts.append(_tool_call(call.get("id"), fn.get("name"), fn.get("arguments"), index))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            parts.append(_tool_call("function_call", legacy.get("name"), legacy.get("arguments"), index))
        return _message("assistant", parts)
    if role in ("tool", "function"):
        call_id = message.get("tool_call_id") if role == "tool" else "function_call"
        if not isinstance(call_id, str) or not call_id:
            raise _bad("a tool message needs a tool_call_id", index)
        text, meta = _tool_result_text(content, index)
        return _message("tool", [Part("tool", "tool_result", text, {"tool_call_id": call_id, **meta})])
    raise _bad(f"unknown role {role!r}", index)


def _anthropic(message: dict[str, Any], index: int | None) -> Message | None:
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise _bad(f"an Anthropic message's role is user or assistant, not {role!r}", index)
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return _message(role, _text_parts(role, content, index))
    if not isinstance(content, list):
        raise _bad(f"content must be a string or a list, not {type(content).__name__}", index)
    parts: list[Part] = []
    for block in content:
        if not isinstance(block, dict):
            raise _bad(f"a content block must be an object, not {type(block).__name__}", index)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise _bad("a text block needs a string", index)
            if text.strip():
                parts.append(Part(role, "message", text, {}))
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(_tool_call(block.get("id"), block.get("name"), block.get("input"), index))
        elif kind == "tool_result":
            text, meta = _tool_result_text(block.get("content"), index)
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise _bad("a tool_result block needs a tool_use_id", index)
            if block.get("is_error"):
                meta["is_error"] = True
            parts.append(Part("tool", "tool_result", text, {"tool_call_id": call_id, **meta}))
        elif kind in ("thinking", "redacted_thinking"):
            if role != "assistant":
                continue
            text = block.get("thinking") if kind == "thinking" else None
            if isinstance(text, str) and text.strip():
                parts.append(Part("assistant", "thinking", text, {}))
            elif kind == "redacted_thinking":
                parts.append(Part("assistant", "thinking", "[redacted thinking]", {"redacted": True}))
        elif kind == "compaction":  # the provider's summary of everything before it
            if isinstance(block.get("content"), str) and block["content"].strip():
                parts.append(Part("assistant", COMPACTION, block["content"], {"by": "anthropic:compact_20260112"}))
            elif isinstance(block.get("encrypted_content"), str):
                parts.append(_opaque("anthropic:compact_20260112", block["encrypted_content"], None))
            # content None: a compaction that failed, a no-op for the API too
        else:
            parts.append(Part(role, "message", f"[{kind} omitted]", {"omitted": str(kind)}))
    return _message(role, parts)


def _opaque(by: str, encrypted: str, item_id: Any) -> Part:
    meta: dict[str, Any] = {"by": by, "opaque": True, "encrypted_chars": len(encrypted),
                            "encrypted_digest": blake2b(encrypted.encode(), digest_size=12).hexdigest()}
    if len(encrypted) <= MAX_OPAQUE_META_CHARS:
        meta["encrypted_content"] = encrypted
    if isinstance(item_id, str):
        meta["item_id"] = item_id
    return Part("assistant", COMPACTION, OPAQUE_TEXT, meta)


_OUTPUT_ITEMS = ("_call",)  # web_search_call, file_search_call, computer_call, mcp_call, ...


def _responses(item: dict[str, Any], index: int | None) -> Message | None:
    """One Responses API item (input or output) in canonical form."""
    kind = item.get("type")
    if kind in (None, "message"):
        role = item.get("role")
        content = item.get("content")
        if role in ("system", "developer"):
            parts = _text_parts("system", content, index)
            if role == "developer":
                parts = [p._replace(meta={**p.meta, "developer": True}) for p in parts]
            return _message("system", parts)
        if role in ("user", "assistant"):
            return _message(role, _text_parts(role, content, index))
        raise _bad(f"unknown role {role!r}", index)
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments") if kind == "function_call" else item.get("input")
        return _message("assistant", [_tool_call(item.get("call_id"), item.get("name"), args, index)])
    if kind in ("function_call_output", "custom_tool_call_output"):
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _bad(f"a {kind} item needs a call_id", index)
        text, meta = _tool_result_text(item.get("output"), index)
        return _message("tool", [Part("tool", "tool_result", text, {"tool_call_id": call_id, **meta})])
    if kind == "reasoning":
        summary = item.get("summary") or []
        texts = [s.get("text") for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)]
        text = "\n".join(t for t in texts if t.strip()) or "[reasoning: encrypted by the provider]"
        meta = {"reasoning_id": item["id"]} if isinstance(item.get("id"), str) else {}
        return _message("assistant", [Part("assistant", "thinking", text, meta)])
    if kind == "compaction":
        encrypted = item.get("encrypted_content")
        if not isinstance(encrypted, str):
            raise _bad("a compaction item needs its encrypted_content", index)
        return _message("assistant", [_opaque("openai:compact", encrypted, item.get("id"))])
    role = "assistant" if isinstance(kind, str) and kind.endswith(_OUTPUT_ITEMS) else "user"
    shown = {k: v for k, v in item.items() if k not in ("id", "status")}
    meta = {"item_type": str(kind)}
    if len(msgspec.json.encode(shown)) <= MAX_ARGUMENT_META_BYTES and not _deeper_than(shown, MAX_ARGUMENT_META_DEPTH):
        meta["item"] = shown
    return _message(role, [Part(role, "other", f"[{kind} item]", meta)])


_ROLE = re.compile(rb'"role"\s*:\s*"(system|developer|user|assistant)"')


def canonical_message(message: Any, api: str, index: int | None = None, *, lenient: bool = False) -> Message | None:
    """A request message (dict, JSON bytes or ``msgspec.Raw``) in canonical form; None when it
    carries nothing to record. Malformed messages raise ``ImportFormatError``; so does content that
    cannot be recorded (text over the size limit, JSON nested deeper than ``MAX_MESSAGE_DEPTH``)
    unless ``lenient``: then it is recorded as a placeholder part whose ``meta["unrecorded"]``
    says why (the proxy's choice: the call goes on, the session shows what it could not keep)."""
    if isinstance(message, (bytes, bytearray, memoryview, msgspec.Raw)):
        raw = bytes(message)
        if json_too_deep(raw) or TOO_DEEP in raw:
            reason = f"a message nested deeper than {MAX_MESSAGE_DEPTH} levels"
            if not lenient:
                raise _bad(reason, index)
            found = _ROLE.search(raw[:4096])
            role = {"developer": "system"}.get(found.group(1).decode(), found.group(1).decode()) if found else "user"
            part = _placeholder(Part(role, "message", "", {}), reason, raw.decode("utf-8", "replace"))
            return Message(role, (part,), _hash(role, [part]))
        try:
            message = msgspec.json.decode(raw)
        except msgspec.DecodeError as e:
            raise _bad(f"not valid JSON: {e}", index) from None
    if not isinstance(message, dict):
        raise _bad(f"a message must be an object, not {type(message).__name__}", index)
    if api == "openai":
        m = _openai(message, index)
    elif api == "anthropic":
        m = _anthropic(message, index)
    elif api == "responses":
        m = _responses(message, index)
    else:
        raise ImportFormatError(f"api must be one of {', '.join(APIS)}; got {api!r}")
    if not lenient and (reason := _unrecorded(m)) is not None:
        raise _bad(reason, index) if index is not None else ImportFormatError(reason)
    return m


def system_message(system: Any, *, lenient: bool = False) -> Message | None:
    """Anthropic's top-level ``system`` (a string or text blocks) as a leading system message."""
    if system is None:
        return None
    if not isinstance(system, (str, list)):
        raise _bad(f"system must be a string or a list of blocks, not {type(system).__name__}", None)
    m = _message("system", _text_parts("system", system, None))
    if not lenient and (reason := _unrecorded(m)) is not None:
        raise ImportFormatError(reason)
    return m


def canonical_reply(reply: Any, api: str, *, lenient: bool = False) -> tuple[Message | None, dict[str, Any]]:
    """A model's reply (a whole response body, or just its message) as a canonical assistant message,
    and the reply's own metadata (model, usage, stop reason)."""
    if not isinstance(reply, dict):
        raise _bad(f"a reply must be an object, not {type(reply).__name__}", None)
    info: dict[str, Any] = {}
    if api == "openai" and "choices" in reply:
        choices = reply.get("choices") or []
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None, _reply_info(reply, info)
        if len(choices) > 1:
            info["choices"] = len(choices)
        if choices[0].get("finish_reason"):
            info["finish_reason"] = choices[0]["finish_reason"]
        message = {"role": "assistant", **(choices[0].get("message") or {})}
    elif api == "responses":
        messages, info = reply_messages(reply, api, lenient=lenient)
        said = [m for m in messages if m.role == "assistant" and any(p.kind == "message" for p in m.parts)]
        return (said[-1] if said else None), info
    elif api == "anthropic" and reply.get("type") == "message":
        message = {"role": "assistant", "content": reply.get("content") or []}
        if reply.get("stop_reason"):
            info["stop_reason"] = reply["stop_reason"]
    else:
        message = {"role": "assistant", **reply}
    return canonical_message(message, api, lenient=lenient), _reply_info(reply, info)


def reply_messages(reply: Any, api: str, *, lenient: bool = False) -> tuple[list[Message], dict[str, Any]]:
    """A reply as the messages it adds to the conversation (a Responses API reply has one per
    output item) and the reply's metadata."""
    if api != "responses":
        message, info = canonical_reply(reply, api, lenient=lenient)
        edits = (reply.get("context_management") or {}).get("applied_edits") if isinstance(reply, dict) else None
        if isinstance(edits, list) and edits:
            info["applied_edits"] = [e for e in edits if isinstance(e, dict)]
        return ([message] if message is not None else []), info
    if not isinstance(reply, dict):
        raise _bad(f"a reply must be an object, not {type(reply).__name__}", None)
    output = reply.get("output") or []
    if not isinstance(output, list):
        raise _bad("a response's output must be a list", None)
    messages = [m for i, item in enumerate(output) if (m := canonical_message(item, api, i, lenient=lenient)) is not None]
    info = _reply_info(reply, {})
    for key in ("status", "previous_response_id"):
        if isinstance(reply.get(key), str):
            info[key] = reply[key]
    return messages, info


def _reply_info(reply: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    for key in ("model", "usage", "id"):
        if reply.get(key) is not None:
            info["reply_id" if key == "id" else key] = reply[key]
    return info


# -- the recorder ---------------------------------------------------------------------------


class MessageRecorder:
    """Records successive full message lists (and the model's replies) into one session.

    The recorder keeps the client's view: the messages of the last request, each with the span ids
    recorded for it. It is rebuilt from the session's log when created, so a restarted proxy or a
    re-run import continues where the last one stopped.
    """

    def __init__(self, session: Any, *, by: str = "client", reply_by: str = "model", lenient: bool = False):
        self.session = session
        self.by = by
        self.reply_by = reply_by
        self.lenient = lenient  # content that cannot be recorded becomes a marked placeholder
        self._hashes: list[str] = []
        self._spans: list[tuple[str, ...]] = []
        self._raw: dict[bytes, Message | None] = {}
        self._last: tuple[str, list[Any], list[Message], int, Any] | None = None  # the last raw request, parsed
        self.resync()

    # -- the client's view ------------------------------------------------------------------

    @property
    def hashes(self) -> list[str]:
        """The hashes of the messages the client's last request held (plus the replies since)."""
        return list(self._hashes)

    @property
    def entries(self) -> list[tuple[str, tuple[str, ...]]]:
        """(message hash, span ids) for each message of the client's view, in order."""
        return list(zip(self._hashes, self._spans))

    def resync(self, *, refresh: bool = False) -> None:
        """Rebuild the client's view from the session's log (after a restart or a failed write).

        A fold over the log: observed parts of recorded messages join the view; a prune or rewrite
        ``by`` this recorder's client takes them out; the client's summaries join it where their
        earliest input was. Compaction by anyone else does not change what the client sent."""
        if refresh:
            with contextlib.suppress(LedgerError):  # a store that went away: read what the session has
                self.session.refresh()
        spans: dict[str, tuple[float, str, int]] = {}  # span id -> (order key, msg hash, part)
        cleared: dict[str, int] = {}  # the provider's context edits: spans cleared so far, by edit
        for ev in self.session.events():
            kind = type(ev).__name__
            if kind == "Observed":
                msg = ev.meta.get("msg")
                if isinstance(msg, str):
                    # a changed system prompt was observed late but stands first in the client's list
                    order = -1.0 / int(ev.span_id[1:]) if ev.meta.get("leading_system") else int(ev.span_id[1:])
                    spans[ev.span_id] = (order, msg, int(ev.meta.get("part", 0)))
            elif kind == "Pruned":
                if ev.by == self.by:
                    spans.pop(ev.span_id, None)
                elif ev.by.startswith("anthropic:clear_"):
                    cleared[ev.by] = cleared.get(ev.by, 0) + 1
            elif kind == "Rewritten":
                if isinstance(ev.meta.get("view_order"), (int, float)) and isinstance(ev.meta.get("msg"), str):
                    spans[ev.span_id] = (float(ev.meta["view_order"]), ev.meta["msg"], int(ev.meta.get("part", 0)))
                elif ev.by == self.by and isinstance(ev.meta.get("msg"), str):
                    keys = [spans.pop(i)[0] for i in ev.inputs if i in spans]
                    if keys:
                        spans[ev.span_id] = (min(keys), ev.meta["msg"], 0)
        hashes: list[str] = []
        ids: list[list[str]] = []
        for span_id, (_, msg, part) in sorted(spans.items(), key=lambda kv: (kv[1][0], kv[1][2])):
            if part == 0 or not hashes or hashes[-1] != msg:
                hashes.append(msg)
                ids.append([span_id])
            else:
                ids[-1].append(span_id)
        self._hashes = hashes
        self._spans = [tuple(i) for i in ids]
        self._cleared = cleared

    # -- canonical lists ----------------------------------------------------------------------

    def _canonical(self, message: Any, api: str, index: int) -> Message | None:
        if isinstance(message, (bytes, msgspec.Raw)):
            key = blake2b(bytes(message), digest_size=16, person=api.encode()[:16]).digest()
            try:
                return self._raw[key]
            except KeyError:
                pass
            found = canonical_message(message, api, index, lenient=True) if self.lenient else canonical_message(message, api, index)
            if len(self._raw) >= _RAW_CACHE_LIMIT + 2 * len(self._hashes):
                self._raw.clear()
            self._raw[key] = found
            return found
        return canonical_message(message, api, index, lenient=True) if self.lenient else canonical_message(message, api, index)

    def canonical_list(self, messages: Iterable[Any], *, api: str, system: Any = None) -> tuple[list[Message], int]:
        """The request's messages in canonical form (system first), and how many carried nothing.

        Raw messages (``msgspec.Raw`` or bytes) that open the list exactly as the previous request's
        did are not looked at again (a C-level comparison): a request that appends costs O(new)."""
        if api not in APIS:
            raise ImportFormatError(f"api must be one of {', '.join(APIS)}; got {api!r}")
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
            raise _bad(f"messages must be a list, not {type(messages).__name__}", None)
        messages = list(messages)  # a copy: the caller may append to its list and send it again
        last = self._last
        if (
            last is not None
            and last[0] == api
            and len(messages) >= len(last[1])
            and last[4] == system
            and messages[: len(last[1])] == last[1]
        ):
            out, skipped, start = list(last[2]), last[3], len(last[1])
        else:
            out, skipped, start = [], 0, 0
            if system is not None:
                head = system_message(system, lenient=self.lenient)
                if head is None:
                    skipped += 1
                else:
                    out.append(head)
        for i in range(start, len(messages)):
            m = self._canonical(messages[i], api, i)
            if m is None:
                skipped += 1
            else:
                out.append(m)
        if messages and isinstance(messages[0], (bytes, msgspec.Raw)):
            self._last = (api, messages, out, skipped, system)
        return out, skipped

    # -- recording ------------------------------------------------------------------------------

    def record_request(
        self,
        messages: Iterable[Any],
        *,
        api: str,
        system: Any = None,
        meta: dict[str, Any] | None = None,
        append: bool = False,
    ) -> RequestRecord:
        """Diff a request's full message list against the client's view and record the changes
        (in one transaction); ``append``: the messages follow the view (a Responses API request
        that names its ``previous_response_id``). A malformed message raises ``ImportFormatError`` before anything is
        written. On any failure the recorder re-reads the session, so a retry is safe."""
        new, skipped = self.canonical_list(messages, api=api, system=system)
        record = RequestRecord(session=self.session.name, messages=len(new), skipped=skipped)
        extra = {"request": meta} if meta else {}
        if append:  # the server holds the history (``previous_response_id``): the request only adds
            new = [m for m in new if not (m.role == "system" and m.hash in self._hashes)]
        hashes = [m.hash for m in new]
        known = len(self._hashes)
        try:
            with self.session.batch():
                if append:
                    for m in new:
                        self._add(m, extra, self.by, record)
                elif hashes[:known] == self._hashes:
                    for m in new[known:]:
                        self._add(m, extra, self.by, record)
                else:
                    self._reconcile(new, hashes, extra, record)
        except BaseException:
            self.resync(refresh=True)
            raise
        record.position = self.session.position
        return record

    def record_reply(self, reply: Any, *, api: str, meta: dict[str, Any] | None = None, compacted: bool = False,
                     parsed: tuple[list[Message], dict[str, Any]] | None = None) -> RequestRecord:
        """Record the model's reply (text and tool calls) as observed, at the end of the client's view;
        a compaction in it as a derived span of what it replaced, context edits as the provider's
        prunes. ``compacted``: the reply of a standalone compaction call (``/v1/responses/compact``).
        ``parsed``: ``reply_messages(reply, api)`` when the caller already has it (read once per call)."""
        if api not in APIS:
            raise ImportFormatError(f"api must be one of {', '.join(APIS)}; got {api!r}")
        messages, info = (parsed[0], dict(parsed[1])) if parsed is not None else reply_messages(reply, api, lenient=self.lenient)
        record = RequestRecord(session=self.session.name)
        edits = info.pop("applied_edits", None)
        if not messages and not edits:
            record.skipped = 1
            record.position = self.session.position
            return record
        record.messages = len(messages)
        extra = {**info, **(meta or {})}
        if edits:
            extra["applied_edits"] = edits
        keep = None
        if compacted:  # a standalone compaction: its output is the new history, kept items first
            keep = {m.hash for m in messages if m.hash in self._hashes}
            messages = [m for m in messages if m.hash not in keep]
        try:
            with self.session.batch():
                if edits:
                    self._apply_edits(edits, record)
                for m in messages:
                    self._add(m, {"reply": extra} if extra else {}, self.reply_by, record, keep=keep)
        except BaseException:
            self.resync(refresh=True)
            raise
        record.position = self.session.position
        return record

    # -- what the provider did to the context -----------------------------------------------------

    def _view_spans(self, keep: set[str] | None = None) -> list[str]:
        """Live spans of the client's view, in order (a provider's compaction replaces them)."""
        live = self.session.state.live
        out = []
        for h, ids in zip(self._hashes, self._spans):
            if keep and h in keep:
                continue
            out.extend(i for i in ids if i in live and live[i].role != "system")
        return out

    def _provider_summary(self, m: Message, i: int, part: Part, extra: dict[str, Any], by: str,
                          record: RequestRecord, keep: set[str] | None, sources: list[str] | None = None) -> str:
        """A provider's compaction as a derived span of the spans it replaced (by default every live
        span of the client's view; audited like any summary; an encrypted one is marked ``opaque``).
        Refused, like any summary of a summary, when one of them is derived: then it is observed,
        marked ``summary_refused``."""
        if sources is None:
            sources = self._view_spans(keep)
        n_obs = self.session.state.n_obs
        meta = {**part.meta, "msg": m.hash, "part": i, "parts": len(m.parts), "provider_compaction": True,
                "view_order": n_obs + 0.5, **extra}
        who = part.meta.get("by", "provider")
        if sources:
            try:
                span = self.session.rewrite(sources, part.text, by=who, role="assistant", meta=meta,
                                            reason=f"{who} compacted {len(sources)} spans of the context")
            except (RewritePolicyError, SpanNotLiveError):
                record.refused.append(m.hash)
            else:
                record.derived.append(span.id)
                if span.generation > 1:
                    record.violations.append(span.id)
                return span.id
        meta.pop("view_order")
        meta = {**meta, "summary_refused": bool(sources)}
        span_id = self.session.observe(part.text, role="assistant", kind="other", meta=meta, by=by).id
        record.observed.append(span_id)
        return span_id

    def _apply_edits(self, edits: list[dict[str, Any]], record: RequestRecord) -> None:
        """Context edits the provider applied (Anthropic ``clear_tool_uses_20250919``,
        ``clear_thinking_20251015``): prunes ``by`` the provider of the oldest tool results or
        thinking turns. The client still sends them; the provider drops them each time."""
        live = self.session.state.live
        view = [(h, [i for i in ids if i in live]) for h, ids in zip(self._hashes, self._spans)]
        for edit in edits:
            kind = edit.get("type")
            if kind == "clear_tool_uses_20250919":
                n = edit.get("cleared_tool_uses")
                targets = [i for _, ids in view for i in ids if live[i].kind == "tool_result"]
            elif kind == "clear_thinking_20251015":
                n = edit.get("cleared_thinking_turns")
                turns = [[i for i in ids if live[i].kind == "thinking"] for _, ids in view]
                targets = [ids for ids in turns if ids]  # type: ignore[misc]
            else:
                continue
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                continue
            by = f"anthropic:{kind}"
            n -= self._cleared.get(by, 0)  # the count includes what earlier calls cleared already
            if n <= 0:
                continue
            self._cleared[by] = self._cleared.get(by, 0) + min(n, len(targets))
            for target in targets[:n]:
                for span_id in (target if isinstance(target, list) else [target]):
                    if span_id in self.session.state.live:
                        self.session.prune(span_id, by=by, reason=f"the provider's {kind} edit",
                                           meta={"edit": {k: v for k, v in edit.items() if isinstance(v, (int, str))}})
                        record.pruned.append(span_id)

    # -- the diff -------------------------------------------------------------------------------

    def _observe(self, m: Message, extra: dict[str, Any], by: str, record: RequestRecord | None = None,
                 keep: set[str] | None = None, sources: list[str] | None = None) -> tuple[str, ...]:
        ids = []
        n = len(m.parts)
        for i, p in enumerate(m.parts):
            if p.kind == COMPACTION:
                ids.append(self._provider_summary(m, i, p, extra, by, record or RequestRecord(session=""), keep, sources))
                continue
            meta = {**p.meta, "msg": m.hash, "part": i, "parts": n, **extra}
            span_id = self.session.observe(p.text, role=p.role, kind=p.kind, meta=meta, by=by).id
            ids.append(span_id)
            if record is not None:
                record.observed.append(span_id)
        return tuple(ids)

    def _add(self, m: Message, extra: dict[str, Any], by: str, record: RequestRecord, keep: set[str] | None = None) -> None:
        ids = self._observe(m, extra, by, record, keep)
        self._hashes.append(m.hash)
        self._spans.append(ids)

    def _prune(self, ids: Sequence[str], reason: str, record: RequestRecord) -> None:
        live = self.session.state.live
        for span_id in ids:
            if span_id in live:  # a compactor may have taken it out already
                self.session.prune(span_id, reason=reason, by=self.by)
                record.pruned.append(span_id)

    def _summarize(self, old: list[tuple[str, ...]], m: Message, extra: dict[str, Any], record: RequestRecord) -> tuple[str, ...] | None:
        """The client's summary of ``old`` as a derived span; None when the session refuses it or
        its inputs are no longer all live (then it is pruned-and-observed instead)."""
        inputs = [span_id for ids in old for span_id in ids]
        live = self.session.state.live
        if not all(i in live for i in inputs):
            return None
        part = m.parts[0]
        meta = {"msg": m.hash, "part": 0, "parts": 1, "client_summary": True, **extra}
        try:
            span = self.session.rewrite(
                inputs, part.text, by=self.by, role=part.role, meta=meta,
                reason=f"the client replaced {len(old)} messages with this one",
            )
        except (RewritePolicyError, SpanNotLiveError):
            record.refused.append(m.hash)
            return None
        record.derived.append(span.id)
        if span.generation > 1:
            record.violations.append(span.id)
        return (span.id,)

    def _all_system(self, entries: Sequence[tuple[str, ...]]) -> bool:
        live = self.session.state.live
        return bool(entries) and all(ids and ids[0] in live and live[ids[0]].role == "system" for ids in entries)

    def _reconcile(self, new: list[Message], hashes: list[str], extra: dict[str, Any], record: RequestRecord) -> None:
        old_hashes, old_spans = self._hashes, self._spans
        out_hashes: list[str] = []
        out_spans: list[tuple[str, ...]] = []
        broken = False  # something new was observed: later kept messages must follow it

        def observe(m: Message, meta: dict[str, Any]) -> None:
            nonlocal broken
            ids = self._observe(m, meta, self.by, record)
            out_hashes.append(m.hash)
            out_spans.append(ids)
            broken = True

        # A provider's compaction the client sends back in place of what it replaced: what this
        # request drops before it is its sources, not the client's prunes.
        compacting = any(m.parts[0].kind == COMPACTION for m in new) and not set(hashes) <= set(old_hashes)
        pending: list[str] = []
        for op, i1, i2, j1, j2 in _opcodes(old_hashes, hashes):
            if compacting and op == "delete":
                live = self.session.state.live
                pending.extend(i for ids in old_spans[i1:i2] for i in ids if i in live and live[i].role != "system")
                continue
            if op == "equal":
                if not broken:
                    out_hashes.extend(old_hashes[i1:i2])
                    out_spans.extend(old_spans[i1:i2])
                    continue
                for k, j in zip(range(i1, i2), range(j1, j2)):
                    self._prune(old_spans[k], "re-sent after a message the client inserted before it", record)
                    observe(new[j], {**extra, "resent": True})
                    record.reobserved += 1
                continue
            dropped = old_spans[i1:i2]
            added = new[j1:j2]
            if op == "replace" and i1 == 0 and j1 == 0 and added[0].role == "system" and self._all_system(dropped):
                # The system prompt changed (a date, an environment note): the new one is observed
                # and stands first in the client's list; the conversation after it is not re-sent.
                for ids in dropped:
                    self._prune(ids, "the client changed its system prompt", record)
                ids = self._observe(added[0], {**extra, "leading_system": True}, self.by, record)
                out_hashes.append(added[0].hash)
                out_spans.append(ids)
                for m in added[1:]:
                    observe(m, extra)
                continue
            if op in ("replace", "insert") and added[0].parts[0].kind == COMPACTION:
                # a provider's compaction the proxy did not see come back: it replaced what the
                # client dropped for it
                live = self.session.state.live
                sources = pending + [i for ids in dropped for i in ids if i in live and live[i].role != "system"]
                pending = []
                ids = self._observe(added[0], extra, self.by, record, sources=sources)
                out_hashes.append(added[0].hash)
                out_spans.append(ids)
                for m in added[1:]:
                    observe(m, extra)
                continue
            if op == "replace" and len(dropped) >= 2 and not broken and added[0].summary_candidate:
                ids = self._summarize(list(dropped), added[0], extra, record)
                if ids is not None:
                    out_hashes.append(added[0].hash)
                    out_spans.append(ids)
                    for m in added[1:]:
                        observe(m, extra)
                    continue
                refused = True
            else:
                refused = False
            for ids in dropped:
                self._prune(ids, "dropped by the client", record)
            for n, m in enumerate(added):
                observe(m, {**extra, "client_summary": True, "summary_refused": True} if refused and n == 0 else extra)
        for span_id in pending:  # dropped after the last compaction: the client's own prunes
            self._prune((span_id,), "dropped by the client", record)
        self._hashes, self._spans = out_hashes, out_spans


def _opcodes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes, with the common head and tail matched first (edits cluster at the end of a
    conversation: the diff of a long one stays cheap)."""
    from difflib import SequenceMatcher

    n_old, n_new = len(old), len(new)
    head = 0
    while head < n_old and head < n_new and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < n_old - head and tail < n_new - head and old[n_old - 1 - tail] == new[n_new - 1 - tail]:
        tail += 1
    ops: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    middle = SequenceMatcher(None, old[head : n_old - tail], new[head : n_new - tail], autojunk=False)
    ops.extend((op, i1 + head, i2 + head, j1 + head, j2 + head) for op, i1, i2, j1, j2 in middle.get_opcodes())
    if tail:
        ops.append(("equal", n_old - tail, n_old, n_new - tail, n_new))
    return ops
