"""An offline stand-in for the OpenAI and Anthropic APIs, and a way to serve an ASGI app on a free
loopback port in a background thread. Used by the proxy's tests, benchmarks and docs.

The fake model's replies come from ``FakeUpstream.responder(api, body) -> Reply`` (by default it
echoes the last user message). Request headers steer failures: ``X-Fake-Status: 503`` answers with
that error, ``X-Fake-Delay: 1.5`` waits before answering, ``X-Fake-Chunk-Delay: 0.1`` waits between
streamed events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FakeUpstream", "Reply", "ToolCall", "serve", "free_port"]


class ToolCall(msgspec.Struct):
    name: str
    arguments: dict[str, Any]
    id: str = ""


class Reply(msgspec.Struct):
    text: str = ""
    tool_calls: list[ToolCall] = []
    prompt_tokens: int = 0


def _last_user_text(api: str, body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        if texts:
            return " ".join(texts)
    return ""


def echo(api: str, body: dict[str, Any]) -> Reply:
    return Reply(text=f"You said: {_last_user_text(api, body)}")


class FakeUpstream:
    """The fake API. ``requests`` keeps every chat body it received (what the proxy sent upstream)."""

    def __init__(self, responder: Callable[[str, dict[str, Any]], Reply] = echo):
        self.responder = responder
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.calls = 0
        from engine.proxy.testing_responses import ResponsesAPI, default_summary

        self.responses = ResponsesAPI(self)
        self.summarize = default_summary  # what the fake provider's compaction writes
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/responses/compact", self._responses_compact, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def _common(self, request: Request, api: str) -> tuple[dict[str, Any] | None, Response | None, float]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return None, JSONResponse({"error": {"type": "invalid_request_error", "message": "bad JSON"}}, 400), 0
        self.calls += 1
        self.requests.append((api, body, dict(request.headers)))
        delay = float(request.headers.get("x-fake-delay", "0") or 0)
        if delay:
            await asyncio.sleep(delay)
        status = int(request.headers.get("x-fake-status", "0") or 0)
        if status:
            return body, JSONResponse({"error": {"type": "fake_error", "message": f"fake upstream error {status}"}}, status), 0
        return body, None, float(request.headers.get("x-fake-chunk-delay", "0") or 0)

    def _ids(self, reply: Reply, prefix: str) -> list[ToolCall]:
        return [
            msgspec.structs.replace(c, id=c.id or f"{prefix}{self.calls}_{i}") for i, c in enumerate(reply.tool_calls)
        ]

    async def _openai(self, request: Request) -> Response:
        body, error, chunk_delay = await self._common(request, "openai")
        if error is not None:
            return error
        reply = self.responder("openai", body)
        calls = self._ids(reply, "call_")
        model = body.get("model", "fake-model")
        usage = {"prompt_tokens": reply.prompt_tokens or 10, "completion_tokens": 5, "total_tokens": (reply.prompt_tokens or 10) + 5}
        tool_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in calls
        ]
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return JSONResponse({
                "id": f"chatcmpl-{self.calls}", "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": usage,
            })

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            data = {"id": f"chatcmpl-{self.calls}", "object": "chat.completion.chunk", "created": 0, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            return f"data: {json.dumps(data)}\n\n".encode()

        async def events() -> AsyncIterator[bytes]:
            yield chunk({"role": "assistant", "content": ""})
            for word in _pieces(reply.text):
                if chunk_delay:
                    await asyncio.sleep(chunk_delay)
                yield chunk({"content": word})
            for i, c in enumerate(calls):
                yield chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]})
                args = json.dumps(c.arguments)
                for half in (args[: len(args) // 2], args[len(args) // 2 :]):
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": half}}]})
            yield chunk({}, "tool_calls" if calls else "stop", usage=usage)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _responses(self, request: Request) -> Response:
        body, error, chunk_delay = await self._common(request, "responses")
        if error is not None:
            return error
        return await self.responses.create(body, chunk_delay)

    async def _responses_compact(self, request: Request) -> Response:
        body, error, _ = await self._common(request, "responses")
        if error is not None:
            return error
        return await self.responses.compact(body)

    async def _anthropic(self, request: Request) -> Response:
        from engine.proxy.testing_responses import anthropic_context_management

        body, error, chunk_delay = await self._common(request, "anthropic")
        if error is not None:
            return error
        reply = self.responder("anthropic", body)
        calls = self._ids(reply, "toolu_")
        model = body.get("model", "fake-model")
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in calls]
        managed = anthropic_context_management(body, content, self.summarize)
        stop = "tool_use" if calls else "end_turn"
        usage = {"input_tokens": reply.prompt_tokens or 10, "output_tokens": 5}
        message = {"id": f"msg_{self.calls}", "type": "message", "role": "assistant", "model": model,
                   "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if managed is not None:
            message["context_management"] = managed
        if not body.get("stream"):
            return JSONResponse(message)

        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        async def events() -> AsyncIterator[bytes]:
            yield event("message_start", {"message": {**message, "content": [], "stop_reason": None,
                                                      "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}})
            for i, block in enumerate(content):
                if block["type"] == "compaction":
                    yield event("content_block_start", {"index": i, "content_block": {"type": "compaction", "content": None}})
                    yield event("content_block_delta", {"index": i, "delta": {"type": "compaction_delta", "content": block["content"]}})
                elif block["type"] == "text":
                    yield event("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
                    for word in _pieces(block["text"]):
                        if chunk_delay:
                            await asyncio.sleep(chunk_delay)
                        yield event("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": word}})
                else:
                    yield event("content_block_start", {"index": i, "content_block": {**block, "input": {}}})
                    args = json.dumps(block["input"])
                    for half in (args[: len(args) // 2], args[len(args) // 2 :]):
                        yield event("content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": half}})
                yield event("content_block_stop", {"index": i})
            delta_extra = {"context_management": managed} if managed is not None else {}
            yield event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}, **delta_extra})
            yield event("message_stop", {})

        return StreamingResponse(events(), media_type="text/event-stream")


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i < len(words) - 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(app: Any, *, port: int | None = None) -> Iterator[str]:
    """Serve an ASGI app on 127.0.0.1 in a background thread; yields its origin; stops on exit."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server on port {port} did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
