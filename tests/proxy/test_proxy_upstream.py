"""The proxy's upstream client (``engine.proxy.upstream``): the plain HTTP/1.1 client against a
hand-written server that answers in every framing HTTP/1.1 allows, and the httpx fallback."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import httpx
import openai
import pytest

from engine import Ledger
from engine.proxy import ProxyConfig, create_app
from engine.proxy import app as proxy_app
from engine.proxy.testing import FakeUpstream, serve
from engine.proxy.upstream import (
    HTTP11Upstream,
    HttpxUpstream,
    UpstreamError,
    UpstreamTimeout,
    open_upstream,
)


@contextlib.asynccontextmanager
async def raw_server(answer):
    """A server that reads each request (head and content-length body) and writes ``answer(request)``
    bytes (None: stay silent); keeps the connection while the answer does not say close."""
    seen: list[tuple[int, bytes]] = []  # (connection number, request)
    conns = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        me = conns
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                seen.append((me, request))
                out = answer(request)
                if out is None:
                    await asyncio.sleep(30)
                    return
                writer.write(out)
                await writer.drain()
                if b"connection: close" in out.lower():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.close()


def _client(origin: str, timeout: float = 5.0) -> HTTP11Upstream:
    return HTTP11Upstream(origin, timeout=timeout, connect_timeout=2.0)


def run(coro):
    return asyncio.run(coro)


def test_content_length_and_chunked_replies_on_one_kept_connection():
    replies = [b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{"ok": true}',
               b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-two: a\r\nx-two: b\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"]

    async def go():
        async with raw_server(lambda req: replies[len(seen) - 1]) as (origin, seen):
            client = _client(origin)
            first = await client.send("POST", "/v1/chat/completions?x=1", [(b"content-type", b"application/json")], b"{}")
            assert first.status_code == 200 and first.header("Content-Type") == "application/json"
            assert await first.aread() == b'{"ok": true}'
            second = await client.send("POST", "/v1/chat/completions", [], b"body")
            assert second.headers.count(("x-two", "a")) == 1 and ("x-two", "b") in second.headers
            assert await second.aread() == b"hello world"
            await client.aclose()
            return seen

    seen = run(go())
    assert [c for c, _ in seen] == [1, 1]  # the connection was kept and used again
    first = seen[0][1]
    assert first.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:" in first and b"\r\ncontent-length: 2\r\n" in first and first.endswith(b"\r\n\r\n{}")


def test_a_body_delimited_by_the_connection_end_an_interim_reply_and_a_path_prefix():
    async def go():
        async with raw_server(lambda req: b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it") as (origin, seen):
            client = _client(origin + "/openai/")
            resp = await client.send("POST", "/v1/responses", [], b"{}")
            assert resp.status_code == 200
            assert await resp.aread() == b"all of it"
            again = await client.send("POST", "/v1/responses", [], b"{}")  # the closed connection is not reused
            assert await again.aread() == b"all of it"
            return seen

    seen = run(go())
    assert seen[0][1].startswith(b"POST /openai/v1/responses HTTP/1.1") and [c for c, _ in seen] == [1, 2]


def test_streamed_chunks_arrive_one_by_one():
    async def go():
        got = []
        ready = asyncio.Event()

        async def handle(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for i in range(3):
                data = f"data: {i}\n\n".encode()
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
                await ready.wait()  # the next event only once the client has the previous one
                ready.clear()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = _client(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        resp = await client.send("POST", "/v1/chat/completions", [], b"{}")
        async for chunk in resp.aiter_raw():
            got.append(chunk)
            ready.set()
        server.close()
        return got

    assert run(go()) == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]


def test_failures_are_upstream_errors_and_silence_a_timeout():
    async def go():
        async with raw_server(lambda req: None) as (origin, _):
            with pytest.raises(UpstreamTimeout):
                await _client(origin, timeout=0.2).send("POST", "/v1/responses", [], b"{}")
        async with raw_server(lambda req: b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\nshort") as (origin, _):
            resp = await _client(origin).send("POST", "/v1/responses", [], b"{}")
            with pytest.raises(UpstreamError, match="mid-reply"):
                await resp.aread()
        async with raw_server(lambda req: b"NOT HTTP AT ALL\r\n\r\n") as (origin, _):
            with pytest.raises(UpstreamError):
                await _client(origin).send("POST", "/v1/responses", [], b"{}")
        dead = _client(origin)  # that server is gone
        with pytest.raises(UpstreamError) as e:
            await dead.send("POST", "/v1/responses", [], b"{}")
        assert not isinstance(e.value, UpstreamTimeout)

    run(go())


def test_a_head_reply_has_no_body_and_credentials_in_the_origin_are_basic_auth():
    async def go():
        async with raw_server(lambda req: b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n") as (origin, seen):
            client = _client(origin.replace("http://", "http://us%40er:p%3Ass@"))
            resp = await client.send("HEAD", "/v1/models", [(b"authorization", b"Bearer client")], b"")
            assert resp.status_code == 200 and await resp.aread() == b""
            return seen

    request = run(go())[0][1]
    assert b"authorization: Basic dXNAZXI6cDpzcw==\r\n" in request and b"Bearer client" not in request


def test_httpx_is_the_fallback_without_httptools_or_behind_an_environment_proxy(monkeypatch):
    assert isinstance(open_upstream("http://127.0.0.1:9", timeout=1, connect_timeout=1), HTTP11Upstream)
    monkeypatch.setenv("HTTPS_PROXY", "http://corporate-proxy.invalid:3128")
    assert isinstance(open_upstream("https://api.openai.com", timeout=1, connect_timeout=1), HttpxUpstream)
    monkeypatch.setenv("NO_PROXY", "api.openai.com")
    assert isinstance(open_upstream("https://api.openai.com", timeout=1, connect_timeout=1), HTTP11Upstream)
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setitem(sys.modules, "httptools", None)
    assert isinstance(open_upstream("http://127.0.0.1:9", timeout=1, connect_timeout=1), HttpxUpstream)


@pytest.mark.parametrize("fallback", [False, True])
def test_the_proxy_records_the_same_over_either_client(tmp_path, monkeypatch, fallback):
    if fallback:
        monkeypatch.setattr(proxy_app, "open_upstream", lambda origin, **kw: HttpxUpstream(origin, **kw))
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with serve(FakeUpstream().app) as origin:
        app = create_app(ProxyConfig(upstream=origin, session="s"), lambda: Ledger.open(db))
        with serve(app) as url:
            kind = type(app.state.proxy.client).__name__
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": reply.choices[0].message.content},
                                     {"role": "user", "content": "again"}], stream=True) if c.choices)
            assert httpx.get(f"{url}/v1/models").status_code == 200  # passed through
    assert kind == ("HttpxUpstream" if fallback else "HTTP11Upstream")
    assert reply.choices[0].message.content == "You said: hi" and streamed == "You said: again"
    with Ledger.open(db) as ledger:
        texts = [x.text for x in ledger.session("s").spans()]
    assert texts == ["hi", "You said: hi", "again", "You said: again"]


def test_calls_in_flight_are_bounded_and_a_reply_dropped_unread_frees_its_slot(monkeypatch):
    from engine.proxy import upstream

    monkeypatch.setattr(upstream, "_MAX_CONNECTIONS", 2)

    async def go():
        async with raw_server(lambda req: b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok") as (origin, _):
            client = _client(origin)
            first = await client.send("POST", "/a", [], b"")
            second = await client.send("POST", "/b", [], b"")
            third = asyncio.ensure_future(client.send("POST", "/c", [], b""))
            await asyncio.sleep(0.1)
            assert not third.done()  # waits for a free slot
            assert await first.aread() == b"ok"
            assert await (await third).aread() == b"ok"
            fourth = await client.send("POST", "/d", [], b"")  # now second and fourth hold both slots
            fifth = asyncio.ensure_future(client.send("POST", "/e", [], b""))
            await asyncio.sleep(0.1)
            assert not fifth.done()
            del second  # never read: its slot is freed when it is collected
            import gc
            gc.collect()
            assert await (await asyncio.wait_for(fifth, 2)).aread() == b"ok"
            assert await fourth.aread() == b"ok"

    run(go())
