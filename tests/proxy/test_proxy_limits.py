"""What the proxy cannot record never costs the client its answer (issue 24, items 5, 6, 13): bodies
over the limit get a clear 413; content too large or nested too deep to record is forwarded, the
client gets the upstream's answer byte for byte, and the session shows what was not recorded."""

from __future__ import annotations

import contextlib
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine import Ledger
from engine.importers.messages import MAX_MESSAGE_DEPTH, json_too_deep
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, serve

USER = {"role": "user", "content": "List the files."}


def _nested(depth: int, leaf: object = 1) -> str:
    return "[" * depth + json.dumps(leaf) + "]" * depth


class Canned:
    """An upstream answering every call with the bytes it is given (and keeping what it got)."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.content_type = "application/json"
        self.got: list[bytes] = []
        self.app = Starlette(routes=[Route("/{path:path}", self._answer, methods=["POST"])])

    async def _answer(self, request: Request) -> Response:
        self.got.append(await request.body())
        return Response(self.body, media_type=self.content_type)


@pytest.fixture(scope="module")
def canned():
    c = Canned()
    with serve(c.app) as origin:
        yield c, origin


@contextlib.contextmanager
def running(origin: str, tmp_path, **config):
    db = f"sqlite:///{tmp_path / 'limits.db'}"
    app = create_app(ProxyConfig(upstream=origin, **config), lambda: Ledger.open(db))
    with serve(app) as url:
        yield url, app.state.proxy, db


def _events(db: str, name: str) -> list:
    with Ledger.open(db) as ledger:
        return list(ledger.session(name).events())


def _marks(db: str, name: str) -> list:
    return [e for e in _events(db, name) if type(e).__name__ == "Marked"]


# -- item 13: the body limit ------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_limit_is_a_413_not_forwarded_and_marked_in_the_named_session(canned, tmp_path, chunked):
    c, origin = canned
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 300_000}]}).encode()
    with running(origin, tmp_path, max_body=100_000) as (url, proxy, db):
        got = len(c.got)
        content = iter([body[i:i + 65536] for i in range(0, len(body), 65536)]) if chunked else body
        r = httpx.post(f"{url}/v1/chat/completions", content=content,
                       headers={"content-type": "application/json", "x-ctxledger-session": "agent"})
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        assert "100,000 bytes" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert len(c.got) == got  # neither was forwarded
        assert proxy.health.report()["counts"]["too_large"] == 2
    with Ledger.open(db) as ledger:
        assert [i.name for i in ledger.sessions()] == ["agent"]  # the unnamed one created nothing
    [mark] = _marks(db, "agent")
    assert mark.label == "proxy:not-recorded" and "over the proxy's limit" in mark.reason


def test_a_message_over_the_text_limit_is_a_marked_placeholder_and_the_call_goes_on(tmp_path):
    fake = FakeUpstream()
    big = "0123456789abcdef" * (9 * 1024 * 1024 // 16)  # 9 MB: over the 8 MB a span may hold
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": '{"path": "dump.log"}'}}]}
    messages = [USER, call, {"role": "tool", "tool_call_id": "c1", "content": big}, {"role": "user", "content": "Summarize it."}]
    with serve(fake.app) as origin, running(origin, tmp_path, session="s") as (url, proxy, db):
        for _ in range(2):  # sent twice: the placeholder is the same message the second time
            r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": messages}, timeout=60)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"].startswith("You said: ")
            messages = [*messages, r.json()["choices"][0]["message"], {"role": "user", "content": "Again."}]
        assert fake.requests[0][1]["messages"][2]["content"] == big  # forwarded whole
        assert proxy.health.report()["status"] == "ok"
    with Ledger.open(db) as ledger:
        s = ledger.session("s")
        spans = s.spans()
        [placeholder] = [x for x in spans if "unrecorded" in x.meta]
        assert placeholder.kind == "tool_result" and placeholder.meta["tool_call_id"] == "c1"
        assert placeholder.text.startswith("[not recorded by ctxledger:") and "the limit is" in placeholder.text
        assert [x.text for x in spans][-2:] == ["Again.", "You said: Again."]
        assert not any(type(e).__name__ == "Pruned" for e in s.events())  # nothing re-observed


# -- item 5: a deeply nested reply -------------------------------------------------------------------


def test_a_deeply_nested_reply_reaches_the_client_and_the_session_says_it_was_not_recorded(canned, tmp_path):
    c, origin = canned
    reply = ('{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", '
             '"content": "ok"}, "finish_reason": "stop"}], "usage": ' + _nested(3000) + "}").encode()
    c.body, c.content_type = reply, "application/json"
    with running(origin, tmp_path, session="s") as (url, proxy, db):
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [USER]})
        assert r.status_code == 200 and r.content == reply
        assert proxy.health.report()["status"] == "ok"
    events = _events(db, "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Observed", "Marked"]
    assert events[1].text == "List the files."
    assert events[2].label == "proxy:not-recorded" and "nests JSON deeper" in events[2].reason


def test_tool_call_arguments_nested_deep_are_a_placeholder_and_the_store_stays_healthy(canned, tmp_path):
    c, origin = canned
    deep_args = json.dumps({"a": json.loads(_nested(200))})
    shallow_deep = json.dumps({"a": json.loads(_nested(30))})  # readable, but kept in the text only
    c.body = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep_args}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": shallow_deep}},
        ]}, "finish_reason": "tool_calls"}]}).encode()
    c.content_type = "application/json"
    with running(origin, tmp_path, session="s") as (url, proxy, db):
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [USER]})
        assert r.status_code == 200 and r.content == c.body
        assert proxy.health.report()["status"] == "ok" and proxy.health.report()["counts"]["store_errors"] == 0
    with Ledger.open(db) as ledger:
        spans = ledger.session("s").spans()
    f, g = spans[1], spans[2]
    assert f.kind == "tool_call" and f.meta["unrecorded"].startswith("tool call arguments nested deeper")
    assert "arguments" not in f.meta and f.meta["tool_call_id"] == "c1"
    assert g.meta["name"] == "g" and "arguments" not in g.meta and g.text.startswith("g(")


def test_a_streamed_reply_with_a_deeply_nested_event_is_passed_on_whole(canned, tmp_path):
    c, origin = canned
    chunks = [
        {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "lo"}}]},
    ]
    stream = "".join(f"data: {json.dumps(ch)}\n\n" for ch in chunks)
    stream += f'data: {{"id": "x", "choices": [], "junk": {_nested(3000)}}}\n\n' + "data: [DONE]\n\n"
    c.body, c.content_type = stream.encode(), "text/event-stream"
    with running(origin, tmp_path, session="s") as (url, proxy, db):
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [USER], "stream": True})
        assert r.status_code == 200 and r.content == c.body
    with Ledger.open(db) as ledger:
        spans = ledger.session("s").spans()
    assert spans[-1].text == "Hello" and spans[-1].meta["reply"]["unrecorded_events"] == 1


# -- item 6: a deeply nested request ------------------------------------------------------------------


def test_a_request_too_deep_to_decode_is_forwarded_unchanged_and_its_messages_recorded(canned, tmp_path):
    c, origin = canned
    c.body, c.content_type = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}}]}).encode(), "application/json"
    body = ('{"model": "m", "messages": [{"role": "user", "content": "Deploy it"}], "metadata": ' + _nested(5000) + "}").encode()
    with running(origin, tmp_path) as (url, proxy, db):
        got = len(c.got)
        r = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.content == c.body
        assert c.got[got:] == [body]  # forwarded unchanged
        assert proxy.health.report()["status"] == "ok"
    with Ledger.open(db) as ledger:
        [info] = ledger.sessions()  # the conversation is still told by its opening
        assert [x.text for x in ledger.session(info.name).spans()] == ["Deploy it", "fine"]


@pytest.mark.parametrize("depth", [MAX_MESSAGE_DEPTH + 1, 500, 3000])
def test_a_message_nested_too_deep_is_a_placeholder_and_the_rest_is_recorded(canned, tmp_path, depth):
    c, origin = canned
    c.body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                         "content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn"}).encode()
    c.content_type = "application/json"
    deep_input = '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": ' + _nested(depth) + "}}]}"
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}
    body = ('{"model": "m", "max_tokens": 5, "messages": [' + json.dumps(USER) + ", " + deep_input + ", "
            + json.dumps(result) + "]}").encode()
    with running(origin, tmp_path, session="s") as (url, proxy, db):
        r = httpx.post(f"{url}/v1/messages", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200
        report = proxy.health.report()
        assert report["status"] == "ok" and report["counts"]["store_errors"] == 0
    with Ledger.open(db) as ledger:
        spans = ledger.session("s").spans()
    assert spans[0].text == "List the files." and spans[-1].text == "fine"
    [placeholder] = [x for x in spans if "unrecorded" in x.meta]
    assert "nested deeper" in placeholder.meta["unrecorded"] and "done" in [x.text for x in spans]


# -- the depth test itself -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab:,'),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=3), children, max_size=3),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(0, 8))
def test_json_too_deep_agrees_with_the_decoded_depth(value, limit):
    text = json.dumps(value)
    assert json_too_deep(text, limit) == (_depth(value) > limit)
    assert json_too_deep(text.encode(), limit) == (_depth(value) > limit)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2500), st.sampled_from(["openai", "anthropic"]), st.booleans())
def test_any_nesting_depth_in_a_request_or_reply_is_recorded_or_marked_and_the_session_stays_readable(depth, api, in_reply):
    """Whatever the depth (the store thread, as the proxy drives it): no store error, every event
    decodes, and the call is either recorded whole or carries a placeholder saying why."""
    import msgspec

    from engine.proxy.app import _decode
    from engine.proxy.recording import Health, StoreWorker

    args = _nested(depth, {"k": "v"})
    if api == "openai":
        call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                        "function": {"name": "f", "arguments": args}}]}
        result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
        reply = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}
    else:
        call = '{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": ' + args + "}}]}"
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]}
        reply = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "done"}]}
    call_json = call if isinstance(call, str) else json.dumps(call)
    body = ('{"model": "m", "messages": [' + json.dumps(USER) + ", " + call_json + ", " + json.dumps(result) + "]}").encode()
    health = Health()
    worker = StoreWorker(lambda: Ledger.open("memory://"), health)
    try:
        try:
            parsed, _ = _decode(api, body)
        except RecursionError:
            from engine.importers.messages import json_shallow

            parsed, _ = _decode(api, json_shallow(body, MAX_MESSAGE_DEPTH + 2))
        if in_reply and api == "openai":
            reply = {"choices": [{"message": msgspec.json.decode(call_json.encode()) if depth < 400 else {"role": "assistant", "content": "x"}}]}
        worker.record_exchange("s", api, parsed.messages, None, {"api": api}, False, reply, {"status": 200})
        assert health.counts["store_errors"] == 0
        s = worker.ledger.session("s")
        events = list(s.events())
        assert events and all(type(e).__name__ != "Marked" or e.label == "proxy:not-recorded" for e in events)
        spans = s.spans()
        assert spans[0].text == "List the files."
        deep_call = [x for x in spans if x.kind == "tool_call"]
        placeholders = [x for x in spans if "unrecorded" in x.meta]
        # the call is recorded (its arguments in meta while shallow enough), or a placeholder says why
        assert deep_call or placeholders
        assert all("arguments" in x.meta or "unrecorded" in x.meta or depth > 14 for x in deep_call)
        assert depth < 50 or not any("arguments" in x.meta for x in deep_call)
        s.render(api)  # the buffer renders
    finally:
        worker.close()
