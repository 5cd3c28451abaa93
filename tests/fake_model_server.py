"""A scripted model on 127.0.0.1 that speaks the OpenAI Chat Completions and Anthropic Messages
HTTP APIs, for driving the official SDKs offline (the same approach as tests/compaction/test_rewriters.py).

``FakeModelServer(handler)``: every POST is decoded and handed to ``handler(path, body)``, which
returns ``(status, reply)`` — a dict (sent as JSON) or bytes. ``requests`` keeps every body.
``openai_reply`` / ``anthropic_reply`` build well-formed responses with text and tool calls.
``FakeServer`` answers from a script instead (``server`` in tests/conftest.py is one per test).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeModelServer", "FakeServer", "openai_ok", "openai_reply", "anthropic_reply", "last_tool_results"]


class FakeModelServer:
    def __init__(self, handler: Callable[[str, dict], tuple[int, Any]]):
        self.handler = handler
        self.requests: list[dict] = []
        self.errors: list[BaseException] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append({"path": self.path, "body": body})
                try:
                    status, reply = server.handler(self.path, body)
                except BaseException as e:  # surface handler bugs in the test, not as a hang
                    server.errors.append(e)
                    status, reply = 400, {"error": {"message": f"fake server handler failed: {e!r}"}}
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("retry-after-ms", "1")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeModelServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def openai_reply(text: str | None = None, calls: list[tuple[str, str, dict | str]] = ()) -> dict:
    """A chat.completion with ``text`` and tool calls ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for cid, name, args in calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "local-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def anthropic_reply(text: str | None = None, calls: list[tuple[str, str, dict]] = ()) -> dict:
    """A message with a text block and ``tool_use`` blocks ``(id, name, input)``."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def last_tool_results(body: dict) -> list[str]:
    """The texts of the tool results at the end of a request (either provider)."""
    if "messages" in body and body.get("messages") and body["messages"][-1].get("role") == "tool":
        out = []
        for m in reversed(body["messages"]):
            if m.get("role") != "tool":
                break
            out.append(m.get("content") or "")
        return out[::-1]
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") == "user" and isinstance(last.get("content"), list):
        out = []
        for b in last["content"]:
            if b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c or ()))
        return out
    return []


class FakeServer(FakeModelServer):
    """Answers each request with the next scripted reply: (status, body, delay seconds)."""

    def __init__(self):
        self.script: list[tuple[int, object, float]] = []
        super().__init__(self._next)

    def _next(self, path: str, body: dict) -> tuple[int, object]:
        status, reply, delay = self.script.pop(0) if self.script else (500, {"error": "no script"}, 0)
        if delay:
            time.sleep(delay)
        return status, reply


def openai_ok(text):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "local-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
