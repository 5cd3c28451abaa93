"""The fake upstream's OpenAI Responses API and the providers' server-side context management, shaped
like the real APIs (the shapes of the ``openai`` and ``anthropic`` SDKs' own types):

- ``POST /v1/responses``: ``input`` items in, ``output`` items out (``message``, ``function_call``,
  ``reasoning``), streamed as ``response.*`` events; ``previous_response_id`` chains onto the
  responses it stored (unless ``store`` is false); ``context_management: [{"type": "compaction",
  "compact_threshold": N}]`` puts an opaque ``compaction`` item first in the output once the context
  is over N (estimated) tokens.
- ``POST /v1/responses/compact``: the user messages of the input, then one opaque ``compaction`` item.
- Anthropic ``context_management.edits`` (beta): ``compact_20260112`` answers with a readable
  ``compaction`` block first once the input is over its trigger; ``clear_tool_uses_20250919`` and
  ``clear_thinking_20251015`` report what they cleared in ``context_management.applied_edits``.

Token counts are estimated as characters / 4.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import JSONResponse, StreamingResponse

__all__ = ["ResponsesAPI", "anthropic_context_management", "estimate_tokens", "default_summary"]


def estimate_tokens(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False)) // 4


def default_summary(texts: list[str]) -> str:
    """What the fake provider's compaction says: the first words of each earlier message."""
    return "Summary of the earlier conversation: " + "; ".join(" ".join(t.split()[:8]) for t in texts if t.strip())


def _item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    if item.get("type") == "function_call_output":
        return str(item.get("output", ""))
    return ""


class ResponsesAPI:
    """State and handlers of the fake Responses API (stored responses for ``previous_response_id``)."""

    def __init__(self, owner: Any):
        self.owner = owner  # the FakeUpstream: responder, calls, ids
        self.stored: dict[str, list[dict[str, Any]]] = {}  # response id -> the whole history after it

    def history(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        previous = body.get("previous_response_id")
        return [*self.stored.get(previous, []), *items] if isinstance(previous, str) else list(items)

    def _output(self, body: dict[str, Any], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        n = self.owner.calls
        out: list[dict[str, Any]] = []
        for entry in body.get("context_management") or []:
            threshold = entry.get("compact_threshold") if isinstance(entry, dict) else None
            if isinstance(threshold, int) and entry.get("type") == "compaction" and estimate_tokens(history) > threshold:
                out.append(_compaction_item(history, n))
        reasoning = body.get("reasoning") or {}
        if isinstance(reasoning, dict) and reasoning.get("summary"):
            out.append({"type": "reasoning", "id": f"rs_{n}", "summary": [
                {"type": "summary_text", "text": "Thinking about what was asked."}], "encrypted_content": None})
        reply = self.owner.responder("responses", {"messages": [
            {"role": i.get("role", "user"), "content": _item_text(i)} for i in history if i.get("role") == "user"]})
        if reply.text:
            out.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
        for i, c in enumerate(reply.tool_calls):
            out.append({"type": "function_call", "id": f"fc_{n}_{i}", "call_id": c.id or f"call_{n}_{i}",
                        "name": c.name, "arguments": json.dumps(c.arguments), "status": "completed"})
        return out

    def _response(self, body: dict[str, Any], output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
        n = self.owner.calls
        return {
            "id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "status": status,
            "model": body.get("model", "fake-model"), "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "previous_response_id": body.get("previous_response_id"),
            "store": body.get("store", True), "instructions": body.get("instructions"), "error": None,
            "incomplete_details": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }

    async def create(self, body: dict[str, Any], chunk_delay: float) -> Any:
        history = self.history(body)
        output = self._output(body, history)
        response = self._response(body, output)
        if body.get("store", True) is not False:
            self.stored[response["id"]] = [*history, *output]
        if not body.get("stream"):
            return JSONResponse(response)
        return StreamingResponse(_events(response, chunk_delay), media_type="text/event-stream")

    async def compact(self, body: dict[str, Any]) -> Any:
        history = self.history(body)
        kept = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": _item_text(i)}]}
                for i in history if i.get("role") == "user" and i.get("type", "message") == "message"]
        output = [*kept, _compaction_item(history, self.owner.calls)]
        return JSONResponse({
            "id": f"cmp_{self.owner.calls}", "object": "response.compaction", "created_at": int(time.time()),
            "output": output, "usage": {"input_tokens": estimate_tokens(history), "output_tokens": 50, "total_tokens": 0,
                                        "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        })


def _compaction_item(history: list[dict[str, Any]], n: int) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps(history, sort_keys=True).encode()).digest()
    return {"type": "compaction", "id": f"cmp_item_{n}", "encrypted_content": base64.b64encode(digest * 4).decode()}


async def _events(response: dict[str, Any], chunk_delay: float) -> AsyncIterator[bytes]:
    import asyncio

    seq = 0

    def event(kind: str, **data: Any) -> bytes:
        nonlocal seq
        seq += 1
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **data})}\n\n".encode()

    shell = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=shell)
    yield event("response.in_progress", response=shell)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event("response.content_part.added", output_index=index, item_id=item["id"], content_index=0, part=part)
            for piece in _split(text):
                if chunk_delay:
                    await asyncio.sleep(chunk_delay)
                yield event("response.output_text.delta", output_index=index, item_id=item["id"], content_index=0,
                            delta=piece, logprobs=[])
            yield event("response.output_text.done", output_index=index, item_id=item["id"], content_index=0, text=text, logprobs=[])
            yield event("response.content_part.done", output_index=index, item_id=item["id"], content_index=0,
                        part={**part, "text": text})
        elif item["type"] == "function_call":
            yield event("response.output_item.added", output_index=index, item={**item, "arguments": "", "status": "in_progress"})
            args = item["arguments"]
            for half in (args[: len(args) // 2], args[len(args) // 2 :]):
                yield event("response.function_call_arguments.delta", output_index=index, item_id=item["id"], delta=half)
            yield event("response.function_call_arguments.done", output_index=index, item_id=item["id"], arguments=args,
                        name=item["name"])
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


def _split(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def anthropic_context_management(body: dict[str, Any], content: list[dict[str, Any]],
                                 summarize: Callable[[list[str]], str]) -> dict[str, Any] | None:
    """Apply the request's ``context_management.edits`` like the API does: a compaction block put
    first in ``content`` once the input is over the trigger; the applied clearing edits returned."""
    edits = (body.get("context_management") or {}).get("edits") or []
    messages = body.get("messages") or []
    applied = []
    for edit in edits:
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind == "compact_20260112":
            trigger = (edit.get("trigger") or {}).get("value", 150_000)
            since = _after_last_compaction(messages)
            if estimate_tokens(since) > trigger:
                texts = [_block_text(m) for m in since]
                content.insert(0, {"type": "compaction", "content": summarize(texts)})
        elif kind == "clear_tool_uses_20250919":
            keep = (edit.get("keep") or {}).get("value", 3)
            results = sum(1 for m in messages for b in _blocks(m) if b.get("type") == "tool_result")
            if results > keep:
                applied.append({"type": kind, "cleared_tool_uses": results - keep, "cleared_input_tokens": 100 * (results - keep)})
        elif kind == "clear_thinking_20251015":
            keep = (edit.get("keep") or {}).get("value", 1)
            turns = sum(1 for m in messages if any(b.get("type") == "thinking" for b in _blocks(m)))
            if turns > keep:
                applied.append({"type": kind, "cleared_thinking_turns": turns - keep, "cleared_input_tokens": 50 * (turns - keep)})
    return {"applied_edits": applied} if edits else None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _block_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text") or b.get("content") or "") for b in _blocks(message) if b.get("type") != "compaction")


def _after_last_compaction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API ignores everything before the last compaction block."""
    for i in range(len(messages) - 1, -1, -1):
        if any(b.get("type") == "compaction" for b in _blocks(messages[i])):
            return messages[i + 1 :]
    return messages
