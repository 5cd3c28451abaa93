"""Streams through the proxy: split into whole events whatever the chunking, reassembled into the reply."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.importers.messages import canonical_reply
from engine.proxy.sse import AnthropicStream, OpenAIStream, SSESplitter


def _openai_stream(text: str, args: dict) -> bytes:
    def ev(delta, finish=None, **extra):
        body = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body)}\n\n"

    raw = ev({"role": "assistant", "content": ""})
    raw += "".join(ev({"content": ch}) for ch in text)
    dumped = json.dumps(args)
    raw += ev({"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "sh", "arguments": ""}}]})
    raw += "".join(ev({"tool_calls": [{"index": 0, "function": {"arguments": dumped[i : i + 3]}}]}) for i in range(0, len(dumped), 3))
    raw += ev({}, "tool_calls", usage={"total_tokens": 7})
    return (raw + "data: [DONE]\n\n").encode()


def _anthropic_stream(text: str, args: dict) -> bytes:
    def ev(name, **data):
        return f"event: {name}\r\ndata: {json.dumps({'type': name, **data})}\r\n\r\n"

    raw = ev("message_start", message={"id": "m1", "model": "claude", "content": [], "usage": {"input_tokens": 3}})
    raw += ev("content_block_start", index=0, content_block={"type": "text", "text": ""})
    raw += "".join(ev("content_block_delta", index=0, delta={"type": "text_delta", "text": ch}) for ch in text)
    raw += ev("content_block_stop", index=0)
    raw += ev("content_block_start", index=1, content_block={"type": "tool_use", "id": "toolu_9", "name": "sh", "input": {}})
    dumped = json.dumps(args)
    raw += "".join(ev("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": dumped[i : i + 4]})
                   for i in range(0, len(dumped), 4))
    raw += ev("content_block_stop", index=1)
    raw += ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 5})
    return (raw + ev("message_stop")).encode()


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), min_size=1, max_size=30)
ARGS = st.dictionaries(st.sampled_from(["cmd", "path", "n"]), st.one_of(st.integers(), st.text(max_size=10)), max_size=3)


@settings(max_examples=150, deadline=None)
@given(text=TEXT, args=ARGS, cuts=st.lists(st.integers(0, 10_000), max_size=40), anthropic=st.booleans())
def test_any_chunking_passes_the_same_bytes_and_assembles_the_same_reply(text, args, cuts, anthropic):
    api = "anthropic" if anthropic else "openai"
    data = (_anthropic_stream if anthropic else _openai_stream)(text, args)
    splitter = SSESplitter()
    assembler = AnthropicStream() if anthropic else OpenAIStream()
    passed, terminal = b"", []
    for chunk in _chunks(data, cuts):
        for raw, name, payload in splitter.feed(chunk):
            passed += raw
            assembler.feed(name, payload)
            terminal.append(assembler.is_terminal(name, payload))
    passed += splitter.rest()
    assert passed == data  # nothing changed, nothing lost, nothing added
    assert terminal[-1] and not any(terminal[:-1])  # only the last event ends the stream
    assert assembler.done
    message, info = canonical_reply(assembler.reply(), api)
    kinds = [(p.kind, p.text if p.kind == "message" else p.meta["arguments"]) for p in message.parts]
    expected_text = [("message", text)] if text.strip() else []
    assert kinds == [*expected_text, ("tool_call", args)]
    assert info["model"] in ("m", "claude")


def test_a_stream_cut_short_assembles_what_arrived_and_is_not_done():
    data = _openai_stream("hello world", {"cmd": "ls"})
    cut = data.index(b'"content": "r"')  # in the middle of the event that carries the "r" of "world"
    splitter, assembler = SSESplitter(), OpenAIStream()
    for _, name, payload in splitter.feed(data[:cut]):
        assembler.feed(name, payload)
    assert not assembler.done
    message, _ = canonical_reply(assembler.reply(), "openai")
    assert message.parts[0].text == "hello wo"
    assert splitter.rest()  # the half event is handed back, not dropped
