"""Server-sent events passing through the proxy: split into whole events, and the model's reply
assembled from them (OpenAI ``chat.completion.chunk`` deltas, Anthropic ``content_block_*`` events).

The proxy forwards every complete event the moment it has it; it holds back only the stream's
terminal event (OpenAI ``data: [DONE]``, Anthropic ``message_stop``) until the assembled reply is
recorded, so a client never sees a finished reply that the ledger does not have.
"""

from __future__ import annotations

import json
from typing import Any

from engine.importers.messages import MAX_MESSAGE_DEPTH, json_too_deep

__all__ = ["SSESplitter", "OpenAIStream", "AnthropicStream", "ResponsesStream", "stream_assembler"]


class SSESplitter:
    """Cuts a byte stream into whole SSE events (each with its own bytes, untouched)."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[tuple[bytes, str, str]]:
        """The events completed by ``chunk``: (raw bytes, event name, data)."""
        self._buf += chunk
        out: list[tuple[bytes, str, str]] = []
        while True:
            cut, sep = _boundary(self._buf)
            if cut < 0:
                return out
            raw, self._buf = self._buf[: cut + sep], self._buf[cut + sep :]
            name, data = _parse(raw[:cut])
            out.append((raw, name, data))

    def rest(self) -> bytes:
        """Bytes of an event the stream never finished."""
        rest, self._buf = self._buf, b""
        return rest


def _boundary(buf: bytes) -> tuple[int, int]:
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.find(sep)
        if i >= 0 and (best < 0 or i < best):
            best, size = i, len(sep)
    return best, size


def _event_json(data: str) -> Any:
    """An event's data as JSON; None when it is not JSON or nests deeper than can be recorded."""
    if json_too_deep(data, MAX_MESSAGE_DEPTH + 4):
        raise _TooDeep
    try:
        return json.loads(data)
    except ValueError:
        return None


class _TooDeep(Exception):
    pass


def _parse(raw: bytes) -> tuple[str, str]:
    name, data = "", []
    for line in raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:][1:] if line[5:6] == " " else line[5:])
    return name, "\n".join(data)


class OpenAIStream:
    """Assembles ``chat.completion.chunk`` events into a ``chat.completion`` body."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.info: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.done = False
        self.error: Any = None
        self.skipped = 0  # events nested too deep to record (passed on, not assembled)

    def is_terminal(self, name: str, data: str) -> bool:
        return data.strip() == "[DONE]"

    def feed(self, name: str, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = _event_json(data)
        except _TooDeep:
            self.skipped += 1
            return
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            self.error = chunk["error"]
        for key in ("id", "model", "usage"):
            if chunk.get(key) is not None:
                self.info[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(call.get("index", 0), {"id": "", "name": "", "arguments": []})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["arguments"].append(fn["arguments"])

    def reply(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "".join(c["arguments"])}}
            for _, c in sorted(self.calls.items())
            if c["id"] and c["name"]
        ]
        if calls:
            message["tool_calls"] = calls
        return {**self.info, "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}]}


class AnthropicStream:
    """Assembles Messages streaming events into a ``message`` body."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.done = False
        self.error: Any = None
        self.skipped = 0  # events nested too deep to record (passed on, not assembled)

    def is_terminal(self, name: str, data: str) -> bool:
        return name == "message_stop"

    def feed(self, name: str, data: str) -> None:
        try:
            event = _event_json(data) if data else {}
        except _TooDeep:
            self.skipped += 1
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type") or name
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
            self.message.pop("content", None)
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            index = event.get("index", len(self.blocks))
            if block.get("type") in ("tool_use", "server_tool_use"):
                self.json_parts[index] = []
            self.blocks[index] = block
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(event.get("index", 0), {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                self.json_parts.setdefault(event.get("index", 0), []).append(delta.get("partial_json", ""))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "compaction_delta":
                for key in ("content", "encrypted_content"):
                    if isinstance(delta.get(key), str):
                        block[key] = (block.get(key) or "") + delta[key]
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.message["stop_reason"] = delta["stop_reason"]
            if isinstance(event.get("context_management"), dict):
                self.message["context_management"] = event["context_management"]
            if isinstance(event.get("usage"), dict):
                usage = dict(self.message.get("usage") or {})
                usage.update(event["usage"])
                self.message["usage"] = usage
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = event.get("error")

    def reply(self) -> dict[str, Any]:
        content = []
        for index, block in sorted(self.blocks.items()):
            block = dict(block)
            if index in self.json_parts:
                raw = "".join(self.json_parts[index])
                if json_too_deep(raw):  # kept as text: the recorder marks it as not recorded
                    block["input"] = raw
                    content.append(block)
                    continue
                try:
                    block["input"] = json.loads(raw) if raw.strip() else (block.get("input") or {})
                except ValueError:
                    block["input"] = {"partial_json": raw}
            content.append(block)
        return {**self.message, "type": "message", "role": "assistant", "content": content}


class ResponsesStream:
    """Assembles Responses API events (``response.output_item.done`` items, the final
    ``response.completed``) into a response body."""

    TERMINAL = ("response.completed", "response.failed", "response.incomplete")

    def __init__(self) -> None:
        self.response: dict[str, Any] = {}
        self.items: dict[int, dict[str, Any]] = {}
        self.text: dict[int, list[str]] = {}  # deltas of items that never finished
        self.done = False
        self.error: Any = None
        self.skipped = 0

    def is_terminal(self, name: str, data: str) -> bool:
        return name in self.TERMINAL

    def feed(self, name: str, data: str) -> None:
        try:
            event = _event_json(data) if data else {}
        except _TooDeep:
            self.skipped += 1
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type") or name
        index = event.get("output_index", 0)
        if kind in ("response.created", "response.in_progress") and isinstance(event.get("response"), dict):
            self.response = {**event["response"], "output": []}
        elif kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            self.text.setdefault(index, []).append(event["delta"])
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.items[index] = event["item"]
        elif kind in self.TERMINAL and isinstance(event.get("response"), dict):
            self.response = event["response"]
            self.done = kind == "response.completed"
        elif kind == "error":
            self.error = event

    def reply(self) -> dict[str, Any]:
        if self.done and isinstance(self.response.get("output"), list):
            return self.response
        output = [self.items[i] for i in sorted(self.items)]
        for i in sorted(self.text):  # a message cut short: what arrived of it
            if i not in self.items:
                output.append({"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "".join(self.text[i])}]})
        return {**self.response, "output": output}


def stream_assembler(api: str) -> OpenAIStream | AnthropicStream | ResponsesStream:
    if api == "responses":
        return ResponsesStream()
    return OpenAIStream() if api == "openai" else AnthropicStream()
