"""The provider message rules (shared/LIBRARY-FACTS.md), as validators that raise AssertionError.

OpenAI Chat Completions: a ``tool`` message answers a preceding assistant ``tool_calls`` entry with
the same id, and every entry is answered before the next non-tool message; ``arguments`` is a JSON
string. Anthropic Messages: ``system`` is top-level; roles alternate user/assistant (starting with
user); every ``tool_use`` block is answered by a ``tool_result`` block with the same id in the
immediately following user message, with the tool_result blocks first.
"""

from __future__ import annotations

import json
import re

TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _nonempty_str(value, what):
    assert isinstance(value, str) and value.strip(), f"{what} must be a non-empty string, got {value!r}"


def check_openai(messages) -> None:
    assert isinstance(messages, list)
    pending: list[str] = []  # calls of the last assistant message not yet answered
    seen_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        assert role in ("system", "user", "assistant", "tool"), f"message {i}: bad role {role!r}"
        if role == "tool":
            assert pending, f"message {i}: a tool message that answers no pending tool call: {m!r}"
            assert m.get("tool_call_id") in pending, f"message {i}: tool_call_id {m.get('tool_call_id')!r} not in {pending}"
            pending.remove(m["tool_call_id"])
            _nonempty_str(m.get("content"), f"message {i} content")
            continue
        assert not pending, f"message {i} ({role}) comes before tool calls {pending} were answered"
        if role == "assistant" and m.get("tool_calls"):
            content = m.get("content")
            assert content is None or isinstance(content, str)
            ids = []
            for call in m["tool_calls"]:
                assert call.get("type") == "function"
                _nonempty_str(call.get("id"), "tool call id")
                fn = call.get("function") or {}
                _nonempty_str(fn.get("name"), "function name")
                assert isinstance(fn.get("arguments"), str), "arguments must be a JSON string"
                json.loads(fn["arguments"])
                ids.append(call["id"])
            assert len(set(ids)) == len(ids), f"message {i}: duplicate tool call ids {ids}"
            assert not (set(ids) & seen_ids), f"message {i}: tool call ids reused: {set(ids) & seen_ids}"
            seen_ids.update(ids)
            pending = list(ids)
        else:
            assert "tool_calls" not in m or not m["tool_calls"]
            _nonempty_str(m.get("content"), f"message {i} content")
    assert not pending, f"tool calls {pending} are never answered"


def check_anthropic(rendered) -> None:
    assert isinstance(rendered, dict) and set(rendered) == {"system", "messages"}
    assert isinstance(rendered["system"], str)
    messages = rendered["messages"]
    assert isinstance(messages, list)
    if messages:
        assert messages[0]["role"] == "user", "the first message must be a user message"
    expected: list[str] = []  # tool_use ids the next user message must answer first
    seen_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m["role"]
        assert role in ("user", "assistant"), f"message {i}: bad role {role!r}"
        if i:
            assert role != messages[i - 1]["role"], f"message {i}: roles must alternate"
        blocks = m["content"]
        assert isinstance(blocks, list) and blocks, f"message {i}: content must be a non-empty list of blocks"
        if role == "assistant":
            assert not expected
            uses = []
            for b in blocks:
                assert b["type"] in ("text", "tool_use"), f"message {i}: {b['type']} in an assistant message"
                if b["type"] == "text":
                    _nonempty_str(b.get("text"), f"message {i} text")
                else:
                    assert TOOL_ID.match(b["id"]), f"bad tool_use id {b['id']!r}"
                    _nonempty_str(b.get("name"), "tool name")
                    assert isinstance(b.get("input"), dict), "tool_use input must be an object"
                    uses.append(b["id"])
            assert len(set(uses)) == len(uses) and not (set(uses) & seen_ids), f"tool_use ids reused: {uses}"
            seen_ids.update(uses)
            expected = uses
            continue
        results = []
        text_started = False
        for b in blocks:
            assert b["type"] in ("text", "tool_result"), f"message {i}: {b['type']} in a user message"
            if b["type"] == "tool_result":
                assert not text_started, f"message {i}: tool_result after text"
                _nonempty_str(b.get("content"), f"message {i} tool_result content")
                results.append(b["tool_use_id"])
            else:
                text_started = True
                _nonempty_str(b.get("text"), f"message {i} text")
        assert sorted(results) == sorted(expected), (
            f"message {i}: tool_result ids {results} must answer exactly the tool_use ids {expected} "
            "of the assistant message before it"
        )
        expected = []
    assert not expected, f"tool_use ids {expected} are never answered"
