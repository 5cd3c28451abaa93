"""``ctxledger proxy``: the official SDKs pointed at the proxy, a fake upstream on 127.0.0.1."""

from __future__ import annotations

import contextlib
import threading
import time

import anthropic
import httpx
import openai
import pytest
from click.testing import CliRunner

from engine import Ledger, StoreUnavailableError
from engine.cli import main
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, Reply, ToolCall, echo, free_port, serve

KEY = "sk-test-SECRET-never-stored-1234"


@pytest.fixture(scope="module")
def upstream():
    fake = FakeUpstream()
    with serve(fake.app) as origin:
        yield fake, origin


@pytest.fixture
def fake(upstream):
    fake, origin = upstream
    fake.responder = echo
    fake.requests.clear()
    yield fake
    fake.responder = echo


@pytest.fixture
def origin(upstream):
    return upstream[1]


@contextlib.contextmanager
def running(origin: str, db: str, **config):
    app = create_app(ProxyConfig(upstream=origin, **config), lambda: Ledger.open(db))
    with serve(app) as url:
        yield url, app.state.proxy


def _db(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'proxy.db'}"


def _tool_loop(api: str, body: dict) -> Reply:
    """A scripted model: asks for `ls`, then answers from the tool's output."""
    last = body["messages"][-1]
    content = last.get("content")
    is_result = last.get("role") == "tool" or (
        isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
    )
    if is_result:
        return Reply(text="There are 2 files: a.py and b.py.")
    return Reply(text="Let me look.", tool_calls=[ToolCall("ls", {"path": "."})])


# -- OpenAI ---------------------------------------------------------------------------------------


def test_openai_sdk_tool_loop_non_streamed_and_streamed_is_recorded(fake, origin, tmp_path):
    fake.responder = _tool_loop
    with running(origin, _db(tmp_path)) as (url, proxy):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        history = [{"role": "system", "content": "You are a shell agent."},
                   {"role": "user", "content": "What files are here?"}]
        for stream in (False, True):
            if stream:
                history.append({"role": "user", "content": "And again, streamed?"})
                chunks = list(client.chat.completions.create(model="gpt-fake", messages=history, stream=True,
                                                             stream_options={"include_usage": True}))
                calls = {}
                for ch in chunks:
                    for d in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
                        slot = calls.setdefault(d.index, {"id": d.id, "name": "", "args": ""})
                        slot["name"] += d.function.name or ""
                        slot["args"] += d.function.arguments or ""
                call = calls[0]
                message = {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["args"]}}]}
            else:
                r = client.chat.completions.create(model="gpt-fake", messages=history, temperature=0.2)
                message = r.choices[0].message.model_dump(exclude_none=True)
                call = {"id": r.choices[0].message.tool_calls[0].id}
            history.append(message)
            history.append({"role": "tool", "tool_call_id": call["id"], "content": "a.py\nb.py"})
            r = client.chat.completions.create(model="gpt-fake", messages=history)
            assert r.choices[0].message.content == "There are 2 files: a.py and b.py."
            history.append(r.choices[0].message.model_dump(exclude_none=True))
        assert proxy.health.report()["counts"]["store_errors"] == 0
    # the upstream saw the client's own headers, the key included, and not the proxy's session header
    assert all(h.get("authorization") == f"Bearer {KEY}" for _, _, h in fake.requests)
    ledger = Ledger.open(_db(tmp_path))
    [info] = ledger.sessions()
    assert info.name.startswith("proxy:what-files-are-here:")
    s = ledger.session(info.name)
    spans = s.spans()
    assert [(x.role, x.kind) for x in spans] == [
        ("system", "message"), ("user", "message"),
        ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "message"),
        ("user", "message"),
        ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "message"),
    ]
    assert all(x.observed for x in spans) and not any(type(e).__name__ == "Pruned" for e in s.events())
    first_call = spans[3]
    assert first_call.meta["name"] == "ls" and first_call.meta["arguments"] == {"path": "."}
    assert spans[4].meta["tool_call_id"] == first_call.meta["tool_call_id"]
    reply_meta = spans[2].meta["reply"]
    assert reply_meta["status"] == 200 and reply_meta["model"] == "gpt-fake" and reply_meta["latency_ms"] >= 0
    assert reply_meta["usage"]["total_tokens"] == 15
    assert spans[1].meta["request"]["temperature"] == 0.2
    assert spans[6].meta["request"]["stream"] is True and spans[7].meta["reply"]["usage"]["total_tokens"] == 15
    rendered = s.render("openai")
    assert rendered[3]["tool_calls"][0]["id"] == first_call.meta["tool_call_id"]
    ledger.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert KEY.encode() not in raw  # never stored


# -- Anthropic --------------------------------------------------------------------------------------


def test_anthropic_sdk_tool_loop_non_streamed_and_streamed_is_recorded(fake, origin, tmp_path):
    fake.responder = _tool_loop
    with running(origin, _db(tmp_path), session="claude-agent") as (url, proxy):
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        history = [{"role": "user", "content": "What files are here?"}]
        for stream in (False, True):
            if stream:
                history.append({"role": "user", "content": [{"type": "text", "text": "Again, streamed."}]})
                with client.messages.stream(model="claude-fake", max_tokens=50, system="Shell agent.", messages=history) as st:
                    message = st.get_final_message()
            else:
                message = client.messages.create(model="claude-fake", max_tokens=50, system="Shell agent.", messages=history)
            blocks = [b.model_dump(exclude_none=True) for b in message.content]
            tool = next(b for b in blocks if b["type"] == "tool_use")
            assert tool["input"] == {"path": "."}
            history.append({"role": "assistant", "content": blocks})
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool["id"], "content": "a.py\nb.py", "cache_control": {"type": "ephemeral"}}]})
            final = client.messages.create(model="claude-fake", max_tokens=50, system="Shell agent.", messages=history)
            history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
    # this SDK version sends the key as a bearer token (older ones as x-api-key): forwarded either way
    assert all(KEY in (h.get("x-api-key"), h.get("authorization", "")[7:]) for _, _, h in fake.requests)
    ledger = Ledger.open(_db(tmp_path))
    s = ledger.session("claude-agent")
    kinds = [(x.role, x.kind) for x in s.spans()]
    assert kinds == [
        ("system", "message"), ("user", "message"),
        ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "message"),
        ("user", "message"),
        ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "message"),
    ]
    assert not any(type(e).__name__ == "Pruned" for e in s.events())
    streamed = s.spans()[7]
    assert streamed.meta["reply"]["stop_reason"] == "tool_use" and streamed.meta["reply"]["usage"]["output_tokens"] == 5
    rendered = s.render("anthropic")
    assert rendered["system"] == "Shell agent."


# -- failures --------------------------------------------------------------------------------------


def _events(db: str, name: str) -> list:
    with Ledger.open(db) as ledger:
        return list(ledger.session(name).events())


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_error_is_passed_back_and_recorded(fake, origin, tmp_path, stream):
    with running(origin, _db(tmp_path), session="s") as (url, proxy):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.InternalServerError) as e:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=stream,
                                           extra_headers={"X-Fake-Status": "503"})
        assert e.value.status_code == 503 and "fake upstream error 503" in str(e.value)
        assert proxy.health.report()["counts"]["upstream_errors"] == 1
    events = _events(_db(tmp_path), "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Observed", "Marked"]
    assert events[-1].label == "proxy:upstream-error" and "503" in events[-1].reason and events[-1].by == "proxy"


def test_upstream_down_is_a_502_with_a_clear_body_and_the_request_is_recorded(tmp_path):
    port = free_port()
    dead = f"http://user:upstream-secret@127.0.0.1:{port}"
    with running(dead, _db(tmp_path), session="s") as (url, _):
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 502
        err = r.json()["error"]
        assert err["type"] == "upstream_unreachable" and err["message"].startswith("ctxledger proxy:")
        assert f"http://127.0.0.1:{port}" in err["message"]
        assert "upstream-secret" not in r.text and "upstream-secret" not in httpx.get(f"{url}/ctxledger/health").text
    events = _events(_db(tmp_path), "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Observed", "Marked"]
    assert "502" in events[-1].reason


def test_anthropic_sdk_sees_the_upstreams_own_error(fake, origin, tmp_path):
    with running(origin, _db(tmp_path), session="s") as (url, _):
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        with pytest.raises(anthropic.RateLimitError) as e:
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}],
                                   extra_headers={"X-Fake-Status": "429"})
        assert e.value.status_code == 429 and "fake upstream error 429" in str(e.value)
    events = _events(_db(tmp_path), "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Observed", "Marked"] and "429" in events[-1].reason


def test_slow_upstream_is_a_504_and_recorded(fake, origin, tmp_path):
    with running(origin, _db(tmp_path), session="s", timeout=0.3) as (url, _):
        r = httpx.post(f"{url}/v1/messages", headers={"X-Fake-Delay": "1.5"},
                       json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 504 and r.json()["error"]["type"] == "upstream_timeout"
    events = _events(_db(tmp_path), "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Observed", "Marked"] and "504" in events[-1].reason


def test_a_store_that_cannot_be_opened_never_blocks_the_call(fake, origin):
    def broken():
        raise StoreUnavailableError("the database server is gone")

    app = create_app(ProxyConfig(upstream=origin), broken)
    with serve(app) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "You said: hi"
        health = httpx.get(f"{url}/ctxledger/health")
        assert health.status_code == 503
        report = health.json()
        assert report["status"] == "degraded" and report["counts"]["store_errors"] >= 2
        assert "the database server is gone" in report["last_store_error"]["error"]


def test_a_locked_store_never_holds_the_call_and_catches_up(fake, origin, tmp_path):
    db = _db(tmp_path)
    with running(origin, db, session="s", store_wait=0.3) as (url, proxy):
        body = {"model": "m", "messages": [{"role": "user", "content": "one"}]}
        assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 200
        # Another writer holds the database's write lock: the proxy's writes wait for it.
        import sqlite3

        blocker = sqlite3.connect(str(tmp_path / "proxy.db"), timeout=0.1)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            body["messages"] += [{"role": "assistant", "content": "You said: one"}, {"role": "user", "content": "two"}]
            started = time.monotonic()
            r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
            took = time.monotonic() - started
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "You said: two"
            assert took < 2.0  # the call went on without the store
            lagging = httpx.get(f"{url}/ctxledger/health")
        finally:
            blocker.rollback()
            blocker.close()
        assert lagging.status_code == 503 and lagging.json()["counts"]["store_slow"] >= 1
        assert lagging.json()["store_lagging"] is True
        deadline = time.monotonic() + 20
        while httpx.get(f"{url}/ctxledger/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        body["messages"] += [{"role": "assistant", "content": "You said: two"}, {"role": "user", "content": "three"}]
        assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 200
        report = httpx.get(f"{url}/ctxledger/health").json()
        assert report["status"] == "ok" and report["counts"]["store_errors"] == 0
    with Ledger.open(db) as ledger:
        texts = [x.text for x in ledger.session("s").spans()]
    assert texts == ["one", "You said: one", "two", "You said: two", "three", "You said: three"]


def test_non_json_and_non_chat_bodies_pass_through_and_are_counted(fake, origin, tmp_path):
    with running(origin, _db(tmp_path)) as (url, proxy):
        r = httpx.post(f"{url}/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["message"] == "bad JSON"  # the upstream's own answer
        r = httpx.post(f"{url}/v1/chat/completions", json={"prompt": "legacy completion"})
        assert r.status_code in (200, 400, 422, 500)  # whatever the upstream says, passed back
        models = httpx.get(f"{url}/v1/models")
        assert models.json()["data"][0]["id"] == "fake-model"
        counts = proxy.health.report()["counts"]
        assert counts["not_chat"] == 2 and counts["passthrough"] == 1 and counts["requests"] == 0
    with Ledger.open(_db(tmp_path)) as ledger:
        assert ledger.sessions() == []


def test_malformed_messages_are_forwarded_counted_and_marked_not_recorded(fake, origin, tmp_path):
    with running(origin, _db(tmp_path), session="s") as (url, proxy):
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "wizard", "content": "x"}]})
        assert r.status_code == 200
        assert proxy.health.report()["counts"]["unrecordable"] >= 1
    events = _events(_db(tmp_path), "s")
    assert [type(e).__name__ for e in events] == ["SessionStarted", "Marked"]
    assert events[1].label == "proxy:not-recorded" and "unknown role 'wizard'" in events[1].reason


# -- sessions ---------------------------------------------------------------------------------------


def test_session_by_header_by_flag_or_by_conversation(fake, origin, tmp_path):
    db = _db(tmp_path)
    with running(origin, db) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Fix the login bug"}])
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Write the release notes"}])
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                       extra_headers={"X-Ctxledger-Session": "named-by-header"})
        bad = httpx.post(f"{url}/v1/chat/completions", headers={"X-Ctxledger-Session": "x" * 300},
                         json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert bad.status_code == 400 and "X-Ctxledger-Session" in bad.json()["error"]["message"]
    with running(origin, db, session="fixed") as (url, _):
        httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    with Ledger.open(db) as ledger:
        names = sorted(i.name for i in ledger.sessions())
    assert names[:2] == ["fixed", "named-by-header"]
    assert names[2].startswith("proxy:fix-the-login-bug:") and names[3].startswith("proxy:write-the-release-notes:")
    assert not any("x" * 300 in n for n in names)


def test_a_restarted_proxy_continues_the_session_without_duplicates(fake, origin, tmp_path):
    db = _db(tmp_path)
    history = [{"role": "user", "content": "Start the build"}]
    for _ in range(2):  # two proxy processes, one after the other, on the same database
        with running(origin, db) as (url, _):
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
            for turn in ("status?", "and now?"):
                r = client.chat.completions.create(model="m", messages=history)
                history += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": turn}]
    with Ledger.open(db) as ledger:
        [info] = ledger.sessions()
        s = ledger.session(info.name)
        assert [x.text for x in s.spans()] == [m["content"] for m in history[:-1]]
        assert not any(type(e).__name__ == "Pruned" for e in s.events())


def _post_turns(url: str, session: str, who: str, turns: int, errors: list[BaseException]) -> None:
    """One writer of a shared session: ``turns`` user messages through the proxy at ``url``."""
    try:
        for i in range(turns):
            httpx.post(f"{url}/v1/chat/completions", headers={"X-Ctxledger-Session": session}, timeout=30,
                       json={"model": "m", "messages": [{"role": "user", "content": f"{who} {i}"}]}).raise_for_status()
    except BaseException as e:  # pragma: no cover - reported by the caller
        errors.append(e)


def _run_all(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def test_sixteen_sessions_in_parallel_and_one_session_from_two_proxies(fake, origin, tmp_path):
    db = _db(tmp_path)
    errors: list[BaseException] = []
    with running(origin, db) as (url, proxy), running(origin, db) as (url2, proxy2):
        def agent(k: int) -> None:
            try:
                client = openai.OpenAI(base_url=f"{url if k % 2 else url2}/v1", api_key=KEY, max_retries=0)
                history = [{"role": "user", "content": f"agent {k} starts"}]
                for turn in range(4):
                    r = client.chat.completions.create(model="m", messages=history)
                    history += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": f"turn {turn}"}]
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=agent, args=(k,)) for k in range(16)]
        # and one shared session written through both proxies at once
        threads += [
            threading.Thread(target=_post_turns, args=(u, "shared", w, 5, errors)) for u, w in ((url, "a"), (url2, "b"))
        ]
        _run_all(threads)
        assert not errors
        assert proxy.health.report()["counts"]["store_errors"] == 0 == proxy2.health.report()["counts"]["store_errors"]
    with Ledger.open(db) as ledger:
        infos = [i for i in ledger.sessions() if i.name.startswith("proxy:agent-")]
        assert len(infos) == 16
        for info in infos:
            s = ledger.session(info.name)
            assert len(s.spans()) == 8 and s.verify()
        shared_session = ledger.session("shared")
        assert shared_session.verify()
        texts = {x.text for x in shared_session.spans()}
        assert texts & {f"a {i}" for i in range(5)} or texts & {f"b {i}" for i in range(5)}
        # unrelated one-message requests into one session: each is a new message in place of the
        # last request and its reply (a "summary", by the diff's rule), or an append; none is lost
        written = [e.text for e in shared_session.events() if type(e).__name__ in ("Observed", "Rewritten", "RewriteRefused")]
        assert {f"a {i}" for i in range(5)} | {f"b {i}" for i in range(5)} <= set(written)


# -- streaming edge cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_client_disconnect_mid_stream_records_what_arrived_as_partial(fake, origin, tmp_path, path):
    fake.responder = lambda api, body: Reply(text="one two three four five six seven eight nine ten")
    with running(origin, _db(tmp_path), session="s") as (url, proxy):
        with httpx.stream("POST", f"{url}{path}", headers={"X-Fake-Chunk-Delay": "0.15"},
                          json={"model": "m", "max_tokens": 50, "stream": True,
                                "messages": [{"role": "user", "content": "count"}]}) as r:
            got = b""
            for chunk in r.iter_raw():
                got += chunk
                if b"two" in got:
                    break
        deadline = time.monotonic() + 10
        while proxy.health.report()["counts"]["partial_replies"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proxy.health.report()["counts"]["partial_replies"] == 1
    with Ledger.open(_db(tmp_path)) as ledger:
        reply = ledger.session("s").spans()[-1]
    assert reply.role == "assistant" and reply.text.startswith("one two") and "ten" not in reply.text
    assert reply.meta["reply"]["partial"] is True and reply.meta["reply"]["client_disconnected"] is True


def test_streamed_events_arrive_before_the_reply_is_finished(fake, origin, tmp_path):
    fake.responder = lambda api, body: Reply(text="alpha beta gamma delta")
    with running(origin, _db(tmp_path), session="s") as (url, _):
        stamps = []
        with httpx.stream("POST", f"{url}/v1/messages", headers={"X-Fake-Chunk-Delay": "0.2"},
                          json={"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "go"}]}) as r:
            for chunk in r.iter_raw():
                stamps.append((time.monotonic(), chunk))
        body = b"".join(c for _, c in stamps)
        assert body.rstrip().endswith(b'data: {"type": "message_stop"}')
        first_text = next(t for t, c in stamps if b"alpha" in c)
        assert stamps[-1][0] - first_text > 0.4  # passed through as it came, not buffered to the end


# -- the narrative: an agent that compacts its own history ---------------------------------------------


def test_agent_that_compacts_its_own_history_is_audited_by_the_cli(fake, origin, tmp_path):
    """Every third turn the agent replaces its history (all but the system prompt and the last
    exchange) by a summary; the summary invents a time, and the second one summarizes the first."""
    db = _db(tmp_path)
    with running(origin, db, session="self-compacting", permissive=True) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        history = [{"role": "system", "content": "You run deploys."}]
        turns = ["Deploy build 7731 to staging.", "Run the smoke tests.", "Promote to production.",
                 "Check error rates.", "Roll back if errors exceed 2 percent.", "Write the summary.", "Done?"]
        for i, turn in enumerate(turns, 1):
            history.append({"role": "user", "content": turn})
            r = client.chat.completions.create(model="m", messages=history)
            history.append({"role": "assistant", "content": r.choices[0].message.content})
            if i % 3 == 0:
                summary = f"Summary of turns 1-{i}: build 7731 deployed and promoted at 14:02."
                history = [history[0], {"role": "user", "content": summary}, *history[-2:]]
    with Ledger.open(db) as ledger:
        s = ledger.session("self-compacting")
        rewrites = [e for e in s.events() if type(e).__name__ == "Rewritten"]
        assert [(e.by, e.generation, e.violation) for e in rewrites] == [("client", 1, False), ("client", 2, True)]
        assert rewrites[1].inputs[0] == rewrites[0].span_id  # the second summary summarized the first
        assert [x.text for x in s.spans()][-2:] == ["Done?", "You said: Done?"]
        assert s.spans()[1].id == rewrites[1].span_id
    result = CliRunner().invoke(main, ["--db", db, "audit", "self-compacting"])
    assert result.exit_code == 1, result.output
    assert "14:02" in result.output
    assert "generation 2" in result.output


def test_compact_mode_sends_the_compacted_buffer_upstream_and_records_the_full_history(fake, origin, tmp_path):
    def responder(api: str, body: dict) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, str) and last.startswith("Summarize the observations"):
            # the rewriter call: restate the sources' own words (so the grounding gate lets it through)
            return Reply(text="Earlier: the user asked about item 1 and item 2.")
        return echo(api, body)

    fake.responder = responder
    db = _db(tmp_path)
    with running(origin, db, session="managed", compact="guarded", budget=400, keep_last_turns=2) as (url, proxy):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        history = [{"role": "system", "content": "You are terse."}]
        for i in range(1, 13):
            history.append({"role": "user", "content": f"Tell me about item {i}. " + "detail " * 30})
            r = client.chat.completions.create(model="m", messages=history)
            history.append({"role": "assistant", "content": r.choices[0].message.content})
        assert proxy.health.report()["counts"]["compactions_done"] >= 1
    sent = [b for api, b, _ in fake.requests if not b["messages"][-1]["content"].startswith("Summarize")]
    assert len(sent[-1]["messages"]) < len(history) - 1  # upstream got less than the client's history
    with Ledger.open(db) as ledger:
        s = ledger.session("managed")
        observed_users = [e.text for e in s.events() if type(e).__name__ == "Observed" and e.role == "user"]
        assert len(observed_users) == 12  # the client's whole history is recorded
        assert all(x.generation <= 1 for x in s.spans())
        assert any(e.by.startswith("compactor:") for e in s.events() if type(e).__name__ in ("Pruned", "Rewritten"))
        assert s.verify()


def test_a_conversation_that_compacted_its_opening_away_stays_in_its_session(fake, origin, tmp_path):
    """No header, no --session: the session is found by the conversation's opening, and after the
    client summarized its opening away, by the recent replies it still carries."""
    db = _db(tmp_path)
    with running(origin, db) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        history = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix the login bug"}]
        for turn in ("Check the session cookie.", "Now the CSRF token."):
            r = client.chat.completions.create(model="m", messages=history)
            history += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": turn}]
        r = client.chat.completions.create(model="m", messages=history)
        history.append({"role": "assistant", "content": r.choices[0].message.content})
        # the client compacts: its first user message is gone
        history = [history[0], {"role": "user", "content": "Summary: we fixed the login bug's cookie handling."},
                   *history[-2:], {"role": "user", "content": "Anything else?"}]
        client.chat.completions.create(model="m", messages=history)
    with Ledger.open(db) as ledger:
        [info] = ledger.sessions()
        s = ledger.session(info.name)
        assert info.name.startswith("proxy:fix-the-login-bug:")
        [summary] = [x for x in s.spans() if x.derived]
        assert summary.text.startswith("Summary:") and len(summary.sources) == 4
        assert s.spans()[-1].text == "You said: Anything else?"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--upstream", "api.openai.com"], "expected an http(s) origin"),
        (["--upstream", "http://127.0.0.1:1", "--listen", "8788"], "expected HOST:PORT"),
        (["--upstream", "http://127.0.0.1:1", "--budget", "0"], "--budget must be a positive"),
    ],
)
def test_cli_usage_errors_exit_2_and_create_no_store(tmp_path, args, message):
    db = tmp_path / "never.db"
    result = CliRunner().invoke(main, ["--db", f"sqlite:///{db}", "proxy", *args])
    assert result.exit_code == 2 and message in result.output
    assert not db.exists()


def test_the_session_header_is_not_forwarded(fake, origin, tmp_path):
    with running(origin, _db(tmp_path)) as (url, _):
        httpx.post(f"{url}/v1/chat/completions", headers={"X-Ctxledger-Session": "mine", "X-Custom": "kept"},
                   json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}).raise_for_status()
    [(_, _, headers)] = fake.requests
    assert "x-ctxledger-session" not in headers and headers["x-custom"] == "kept"


def test_a_short_common_reply_never_joins_two_conversations(fake, origin, tmp_path):
    fake.responder = lambda api, body: Reply(text="Done.")
    db = _db(tmp_path)
    with running(origin, db) as (url, _):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        first = [{"role": "system", "content": "You run chores."}, {"role": "user", "content": "Water the plants"}]
        client.chat.completions.create(model="m", messages=first)
        # another conversation, never seen, that happens to carry the same short reply
        other = [{"role": "system", "content": "You run chores."}, {"role": "user", "content": "Feed the cat"},
                 {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks"}]
        client.chat.completions.create(model="m", messages=other)
    with Ledger.open(db) as ledger:
        names = sorted(i.name for i in ledger.sessions())
        assert len(names) == 2 and names[0].startswith("proxy:feed-the-cat:") and names[1].startswith("proxy:water-the-plants:")
        assert not any(type(e).__name__ == "Pruned" for n in names for e in ledger.session(n).events())


def test_two_proxies_on_postgresql_share_a_session(fake, origin):
    """Two proxy processes' worth of writers on one PostgreSQL session: conflicts are retried, nothing lost."""
    from conftest import drop_schema, postgres_url

    url_db = postgres_url()
    try:
        with running(origin, url_db) as (url, proxy), running(origin, url_db) as (url2, proxy2):
            errors: list[BaseException] = []
            _run_all([
                threading.Thread(target=_post_turns, args=(u, "pg-shared", w, 6, errors))
                for u, w in ((url, "a"), (url2, "b"))
            ])
            assert not errors
            assert proxy.health.report()["counts"]["store_errors"] == 0 == proxy2.health.report()["counts"]["store_errors"]
        with Ledger.open(url_db) as ledger:
            s = ledger.session("pg-shared")
            assert s.verify()
            written = [e.text for e in s.events() if type(e).__name__ in ("Observed", "Rewritten", "RewriteRefused")]
            assert {f"a {i}" for i in range(6)} | {f"b {i}" for i in range(6)} <= set(written)
    finally:
        drop_schema(url_db)
