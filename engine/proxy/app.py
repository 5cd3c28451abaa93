"""The proxy's HTTP side: a Starlette app that forwards to the upstream origin (``upstream``: plain
keep-alive HTTP/1.1, or ``httpx``) and records chat calls on the way through.

- ``POST /v1/chat/completions`` (OpenAI-compatible) and ``POST /v1/messages`` (Anthropic): the
  request's messages are diffed into the session, the call is forwarded unchanged (or, with
  compaction on, with the session's compacted buffer as its messages), the reply is recorded —
  streamed replies chunk by chunk, assembled and recorded before the stream's final event.
- ``GET /ctxledger/health``: counters and the last store failure.
- anything else: forwarded unrecorded.

Headers (authorization included) are forwarded and never logged or stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.errors import InvalidInputError, LedgerError
from engine.importers.messages import MAX_MESSAGE_DEPTH, canonical_message, json_shallow, json_too_deep
from engine.proxy.following import fingerprint
from engine.proxy.guard import TOKEN_HEADER, Guard
from engine.proxy.naming import SESSION_HEADER, conversation_key, header_session, opening
from engine.proxy.recording import NOT_RECORDED, UPSTREAM_ERROR, Health, StoreWorker
from engine.proxy.sse import SSESplitter, stream_assembler
from engine.proxy.upstream import UpstreamError, UpstreamResponse, UpstreamTimeout, open_upstream

__all__ = ["ProxyConfig", "create_app", "CHAT_PATHS", "without_credentials"]

log = logging.getLogger("ctxledger.proxy")

CHAT_PATHS = {
    "/v1/chat/completions": "openai", "/chat/completions": "openai", "/v1/messages": "anthropic",
    "/v1/responses": "responses", "/responses": "responses",
    "/v1/responses/compact": "responses", "/responses/compact": "responses",  # a standalone compaction
}
_HOP = {
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer", b"trailers",
    b"transfer-encoding", b"upgrade", b"host", b"content-length", b"accept-encoding", b"expect",
    SESSION_HEADER.encode(), TOKEN_HEADER.encode(),
}  # ``expect``: the proxy has the whole body before it calls the upstream
_MIN_REPLY_CHARS = 24  # replies shorter than this never identify a conversation
_HOP_BACK = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "upgrade"}

class _ChatBody(msgspec.Struct):
    """The parts of a chat request the proxy reads; the messages stay raw (hashed, parsed lazily)."""

    messages: list[msgspec.Raw]
    model: Any = None
    stream: Any = False
    system: Any = None
    temperature: Any = None
    max_tokens: Any = None
    tools: msgspec.Raw | None = None


class _ResponsesBody(msgspec.Struct):
    """The parts of a Responses API request the proxy reads."""

    input: list[msgspec.Raw] | str | None = None
    model: Any = None
    stream: Any = False
    instructions: Any = None
    previous_response_id: Any = None
    store: Any = None
    temperature: Any = None
    max_output_tokens: Any = None
    tools: msgspec.Raw | None = None


_decoder = msgspec.json.Decoder(_ChatBody)
_responses_decoder = msgspec.json.Decoder(_ResponsesBody)


def _decode(api: str, body: bytes) -> tuple[_ChatBody, dict[str, Any]]:
    """The request as a chat body (a Responses request's ``input`` as its messages, its
    ``instructions`` as the system prompt), and what a Responses request adds."""
    if api != "responses":
        return _decoder.decode(body), {}
    r = _responses_decoder.decode(body)
    items = r.input if isinstance(r.input, list) else (
        [msgspec.Raw(msgspec.json.encode({"role": "user", "content": r.input}))] if isinstance(r.input, str) else [])
    extra: dict[str, Any] = {}
    if isinstance(r.previous_response_id, str) and r.previous_response_id:
        extra["previous_response_id"] = r.previous_response_id
    if r.store is False:
        extra["store"] = False
    chat = _ChatBody(messages=items, model=r.model, stream=r.stream, system=r.instructions if isinstance(r.instructions, str) else None,
                     temperature=r.temperature, max_tokens=r.max_output_tokens, tools=r.tools)
    return chat, extra


class _Call:
    """One chat call on its way through: which session, and the request as the recorder takes it."""

    __slots__ = ("name", "api", "request", "compacted")

    def __init__(self, name: str, api: str, messages: list[msgspec.Raw], system: Any, meta: dict[str, Any],
                 append: bool = False, compacted: bool = False):
        self.name = name
        self.api = api
        self.compacted = compacted  # a standalone compaction call: its reply is the new history
        self.request = (name, api, messages, system, meta, append)


class ProxyConfig(msgspec.Struct, kw_only=True):
    upstream: str
    session: str | None = None  # one fixed session for every call (``--session``)
    compact: str | None = None  # a compaction policy name: send the compacted buffer upstream
    budget: int = 200_000
    keep_last_turns: int = 8
    permissive: bool = False
    timeout: float = 600.0  # seconds the upstream may take between bytes
    store_wait: float = 2.0  # seconds a call waits for the store before it goes on without it
    connect_timeout: float = 10.0
    token: str | None = None  # required in X-Ctxledger-Token when set (``--token``; needed off loopback)
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides loopback ones (without a token)
    allowed_origins: tuple[str, ...] = ()  # browser origins let in (none by default)
    max_body: int = 32 * 1024 * 1024  # bytes of a request body; larger ones are refused with 413


def without_credentials(url: str) -> str:
    """``url`` fit to show: no user name or password, no query string (keys sometimes travel there)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return url
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc, query="", fragment="").geturl()


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": f"ctxledger proxy: {message}"}}, status_code=status)


def _client_of(request: Request) -> str:
    """Who is calling, to tell conversations apart: credentials and User-Agent (hashed, never kept)."""
    h = request.headers
    return "\x00".join((h.get("authorization", ""), h.get("x-api-key", ""), h.get("user-agent", "")))


def _forward_headers(request: Request) -> list[tuple[bytes, bytes]]:
    headers = [(k, v) for k, v in request.scope["headers"] if k.lower() not in _HOP]
    headers.append((b"accept-encoding", b"identity"))  # the proxy reads what it records
    return headers


def _back_headers(resp: UpstreamResponse) -> dict[str, str]:
    back: dict[str, str] = {}
    for k, v in resp.headers:
        k = k.lower()
        if k not in _HOP_BACK:
            back[k] = f"{back[k]}, {v}" if k in back else v
    return back


def _compactor_factory(config: ProxyConfig, api: str, model: Any, headers: dict[str, str]) -> Callable[[], Any]:
    """A compactor whose rewriter is the upstream model, called with the client's own credentials
    (held in memory for this call only)."""

    def make() -> Any:
        from engine.compaction import policy
        from engine.rewriters import AnthropicRewriter, OpenAIRewriter

        name = model if isinstance(model, str) and model else "default"
        auth = headers.get("authorization", "")
        key = headers.get("x-api-key") or (auth[7:] if auth.lower().startswith("bearer ") else None) or "none"
        if api == "openai":
            rewriter = OpenAIRewriter(name, base_url=config.upstream.rstrip("/") + "/v1", api_key=key, max_retries=0)
        else:
            rewriter = AnthropicRewriter(name, base_url=config.upstream.rstrip("/"), api_key=key, max_retries=0)
        return policy(
            config.compact or "guarded", budget=config.budget, keep_last_turns=config.keep_last_turns,
            rewriter=rewriter, gate=True,
        )

    return make


class _Proxy:
    def __init__(self, config: ProxyConfig, open_ledger: Callable[[], Any]):
        self.config = config
        self.health = Health()
        self.store = StoreWorker(open_ledger, self.health, permissive=config.permissive)
        self.client: Any = None  # the upstream client (``upstream.open_upstream``), opened with the app
        self.pending: set[asyncio.Future] = set()
        self.heads: dict[str, str] = {}  # session name -> the fingerprint (client, system prompt, tools) it was opened with
        self.shown_upstream = without_credentials(config.upstream)  # for health, error bodies, logs

    # -- lifecycle ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.client = open_upstream(self.config.upstream, timeout=self.config.timeout,
                                    connect_timeout=self.config.connect_timeout)
        try:
            await self.store.run(self._open_store)
            yield
        finally:
            if self.pending:
                await asyncio.wait(self.pending, timeout=10)
            await self.client.aclose()
            self.store.close()

    def _open_store(self) -> None:
        try:
            self.store.open()
        except Exception as e:
            self.health.store_error("opening the store", "", e)
            log.error("ctxledger proxy: STORE ERROR: cannot open the store; calls are forwarded unrecorded",
                      exc_info=True)

    # -- routes -------------------------------------------------------------------------------

    async def health_route(self, request: Request) -> Response:
        report = self.health.report()
        report["upstream"] = self.shown_upstream
        report["compact"] = self.config.compact
        report["sessions_open"] = self.store.open_sessions()
        return JSONResponse(report, status_code=503 if report["status"] != "ok" else 200)

    async def _read_body(self, request: Request) -> bytes | None:
        """The request body, or None when it is over ``max_body`` (read no further than that)."""
        limit = self.config.max_body
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, request: Request) -> Response:
        self.health.count("too_large")
        message = f"the request body is over the proxy's limit of {self.config.max_body:,} bytes (--max-body-mb); not forwarded"
        name = self._named_session(request)
        if name is not None:
            self._track(self._submit(self.store.record_outcome, name, f"{request.url.path}: {message}", NOT_RECORDED))
        log.warning("ctxledger proxy: %s (%s %s)", message, request.method, request.url.path)
        return _error(413, "request_too_large", message)

    def _named_session(self, request: Request) -> str | None:
        try:
            return header_session(request.headers.get(SESSION_HEADER)) or self.config.session
        except InvalidInputError:
            return None

    async def passthrough(self, request: Request, body: bytes | None = None) -> Response:
        if body is None:
            body = await self._read_body(request)
            if body is None:
                return self._too_large(request)
        self.health.count("passthrough")
        return await self._forward_plain(request, body)

    async def chat(self, request: Request) -> Response:
        api = CHAT_PATHS[request.url.path]
        body = await self._read_body(request)
        if body is None:
            return self._too_large(request)
        try:
            header_session(request.headers.get(SESSION_HEADER))
        except InvalidInputError as e:
            return _error(400, "invalid_request_error", e.message)
        compacting = self.config.compact is not None and api != "responses"
        # What goes upstream is the body as it came, unless compaction replaces its history: then it
        # is sent now, and read, matched to its session and made ready to record while the upstream
        # works (none of that decides what is sent).
        started = time.perf_counter()
        sending = None if compacting else asyncio.ensure_future(self._send(request, body))
        try:
            return await self._chat(request, api, body, compacting, sending, started)
        finally:
            if sending is not None and not sending.done():
                sending.cancel()  # the client went away before the upstream answered

    async def _chat(self, request: Request, api: str, body: bytes, compacting: bool,
                    sending: asyncio.Future | None, started: float) -> Response:
        try:
            parsed, extra = _decode(api, body)
        except msgspec.DecodeError:
            self.health.count("not_chat")
            return await self._forward_plain(request, body, sending)
        except RecursionError:  # JSON nested deeper than a decoder reads: record what is not
            try:
                parsed, extra = _decode(api, json_shallow(body, MAX_MESSAGE_DEPTH + 2))
            except (msgspec.DecodeError, RecursionError):
                return await self._unreadable(request, body, sending)
        self.health.count("requests")
        previous = extra.get("previous_response_id")
        try:
            named = header_session(request.headers.get(SESSION_HEADER)) or self.config.session
            owner = self.store.response_owner(previous) if previous and not named else None
            name, conversation = (owner, None) if owner else self._session_for(request, parsed, api)
        except InvalidInputError as e:
            return _error(400, "invalid_request_error", e.message)
        meta = {"api": api, "path": request.url.path, **extra}
        if conversation is not None:  # read back after a restart (encrypted stores' random names)
            meta["conversation"] = conversation
        for key in ("model", "temperature", "max_tokens"):
            value = getattr(parsed, key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                meta[key] = value
        stream = parsed.stream is True
        if stream:
            meta["stream"] = True
        call = _Call(name, api, parsed.messages, parsed.system if api != "openai" else None, meta,
                     append=previous is not None, compacted=request.url.path.endswith("/compact"))
        # A streamed reply starts reaching the client before it ends, and compaction works on the
        # recorded history: then the request is recorded first, on its own. Otherwise the request and
        # its reply (or outcome) are recorded together, in one transaction, before the client gets it.
        recorded = self._submit(self.store.record_request, *call.request) if stream or compacting else None
        upstream_body = body
        if compacting:
            await self._settle(recorded, "recording a request")
            factory = _compactor_factory(self.config, api, parsed.model, dict(request.headers))
            rendering = self._submit(self.store.compact_and_render, name, api, factory)
            if await self._settle(rendering, "compacting"):
                rendered = rendering.result()
                if rendered is not None:
                    with contextlib.suppress(ValueError, RecursionError):  # unreadable: sent as it came
                        upstream_body = _with_buffer(body, api, rendered)
        try:
            resp = await (sending if sending is not None else self._send(request, upstream_body))
        except UpstreamTimeout as e:
            return await self._failed(call, recorded, 504, "upstream_timeout",
                                      f"upstream {self.shown_upstream} did not answer in time ({e})")
        except UpstreamError as e:
            return await self._failed(call, recorded, 502, "upstream_unreachable",
                                      f"upstream {self.shown_upstream} is unreachable: {e}")
        reply_meta: dict[str, Any] = {"status": resp.status_code}
        if resp.status_code >= 400:
            try:
                content = await resp.aread()
            except UpstreamError as e:
                await resp.aclose()
                return await self._failed(call, recorded, 502, "upstream_failed", f"reading the upstream's error failed: {e}")
            await resp.aclose()
            self.health.count("upstream_errors")
            outcome = (UPSTREAM_ERROR, f"{request.method} {request.url.path} -> HTTP {resp.status_code} from the upstream: "
                       f"{content[:500].decode('utf-8', 'replace')}")
            await self._record_end(call, recorded, None, reply_meta, outcome)
            return Response(content, status_code=resp.status_code, headers=_back_headers(resp))
        if "text/event-stream" in resp.header("content-type"):
            if recorded is None:  # streamed although not asked to: the request goes in first
                recorded = self._submit(self.store.record_request, *call.request)
            await self._settle(recorded, "recording a request")  # in the ledger before any of the reply
            return StreamingResponse(
                self._relay(resp, call, reply_meta, started),
                status_code=resp.status_code, headers=_back_headers(resp),
            )
        try:
            content = await resp.aread()
        except UpstreamTimeout:
            await resp.aclose()
            return await self._failed(call, recorded, 504, "upstream_timeout", "the upstream stopped answering mid-reply")
        except UpstreamError as e:
            await resp.aclose()
            return await self._failed(call, recorded, 502, "upstream_failed", f"the upstream broke off its reply: {e}")
        await resp.aclose()
        reply_meta["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
        reply, outcome = _decode_reply(content)
        if reply is None:
            self.health.count("unrecordable")
        await self._record_end(call, recorded, reply, reply_meta, outcome)
        return Response(content, status_code=resp.status_code, headers=_back_headers(resp))

    async def _record_end(self, call: _Call, recorded: asyncio.Future | None, reply: dict[str, Any] | None,
                          reply_meta: dict[str, Any], outcome: tuple[str, str] | None) -> None:
        """Record how a call ended: with its request in one transaction, or after it."""
        if recorded is None:
            future = self._submit(self.store.record_exchange, *call.request, reply, reply_meta, outcome, call.compacted)
            await self._settle(future, "recording a call")
            return
        await self._settle(recorded, "recording a request")
        if reply is not None:
            await self._settle(self._submit(self.store.record_reply, call.name, call.api, reply, reply_meta, call.compacted),
                               "recording a reply")
        if outcome:
            await self._settle(self._submit(self.store.record_outcome, call.name, outcome[1], outcome[0]), "recording an outcome")

    # -- pieces ---------------------------------------------------------------------------------

    def _submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Queue a store operation on the store thread (in order) without waiting for it."""
        return asyncio.wrap_future(self.store.submit(fn, *args))

    def _track(self, future: asyncio.Future) -> None:
        self.pending.add(future)
        future.add_done_callback(self.pending.discard)

    async def _settle(self, future: asyncio.Future, what: str) -> bool:
        """Wait for a store operation, but never longer than ``store_wait``: a slow store must not
        hold the agent's call. The operation still completes (or fails loudly) in the background."""
        done, _ = await asyncio.wait({future}, timeout=self.config.store_wait)
        if done:
            return True
        self.health.store_slow(what)
        log.error("ctxledger proxy: STORE SLOW: %s took over %.1f s; the call goes on, the write completes later",
                  what, self.config.store_wait)
        self._track(future)
        return False

    def _session_for(self, request: Request, parsed: _ChatBody, api: str) -> tuple[str, str | None]:
        """The session's name, and the conversation's key when the name cannot tell it."""
        named = header_session(request.headers.get(SESSION_HEADER))
        if named:
            return named, None
        if self.config.session:
            return self.config.session, None
        head, first_user = opening(parsed.messages, api, parsed.system if api == "anthropic" else None)
        key, name = conversation_key(head, first_user)
        conversation = None
        if not self.store.plaintext:  # an encrypted store: the name must say nothing of the content
            name, conversation = self.store.conversations.name_for(key), key
        head_hash = head.hash if head is not None else "-"
        fp = fingerprint(_client_of(request), head_hash, bytes(parsed.tools) if parsed.tools is not None else None)
        if not self.store.known(name):
            rewritten = self.store.follow.joined(fp, name) or self._rewrite_of(parsed, api, head, first_user, fp)
            if rewritten is not None:
                self.store.follow.join(fp, name, rewritten)  # the calls after the rewrite open like it
                return rewritten, conversation
            # A conversation this proxy has not seen by its opening: perhaps one whose client compacted
            # its first message away. A recent reply of some length, recorded in a session of the
            # same client, system prompt and tools, tells which conversation it continues (short replies like "Done."
            # are too common to tell conversations apart).
            hashes = []
            for i in range(len(parsed.messages) - 1, max(-1, len(parsed.messages) - 17), -1):
                try:
                    m = canonical_message(parsed.messages[i], api, i)
                except LedgerError:
                    continue
                if m is not None and m.role == "assistant" and sum(len(p.text) for p in m.parts) >= _MIN_REPLY_CHARS:
                    hashes.append(m.hash)
            owner = self.store.owner_of(hashes)
            if owner is not None and self.heads.get(owner) == fp:  # the same client, prompt and tools
                return owner, conversation
        self.heads.setdefault(name, fp)
        self.store.follow.register(name, fp)
        return name, conversation

    def _rewrite_of(self, parsed: _ChatBody, api: str, head: Any, first_user: Any, fp: str) -> str | None:
        """The conversation this request rewrites whole (a client's compaction without a header),
        by the rule of ``engine.proxy.following``; None for a new conversation."""
        if first_user is None or not first_user.summary_candidate:
            return None
        for i, raw in enumerate(parsed.messages[:8]):
            try:
                m = canonical_message(raw, api, i)
            except LedgerError:
                return None
            if m is None or m.role == "system":
                continue
            if m.hash != first_user.hash:
                return None  # the summary must come first
            total = len(parsed.messages) + (1 if head is not None and api != "openai" else 0)
            return self.store.follow.rewritten(fp, first_user.parts[0].text, total, alone=len(parsed.messages) - i < 2)
        return None

    async def _send(self, request: Request, body: bytes) -> UpstreamResponse:
        """The upstream's reply to the request, once its status and headers are in."""
        assert self.client is not None
        scope = request.scope
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        return await self.client.send(request.method, target, _forward_headers(request), body)

    async def _forward_plain(self, request: Request, body: bytes, sending: asyncio.Future | None = None) -> Response:
        """Forward unrecorded (``sending``: the call, already on its way)."""
        try:
            resp = await (sending if sending is not None else self._send(request, body))
        except UpstreamTimeout as e:
            return _error(504, "upstream_timeout", f"upstream {self.shown_upstream} did not answer in time ({e})")
        except UpstreamError as e:
            return _error(502, "upstream_unreachable", f"upstream {self.shown_upstream} is unreachable: {e}")

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:  # also when the client went away and this task is being cancelled
                self._track(asyncio.ensure_future(resp.aclose()))

        return StreamingResponse(relay(), status_code=resp.status_code, headers=_back_headers(resp))

    async def _failed(self, call: _Call, recorded: asyncio.Future | None, status: int, kind: str, message: str) -> Response:
        self.health.count("upstream_errors")
        log.warning("ctxledger proxy: %s (session %r)", message, call.name)
        await self._record_end(call, recorded, None, {}, (UPSTREAM_ERROR, f"HTTP {status}: {message}"))
        return _error(status, kind, message)

    async def _unreadable(self, request: Request, body: bytes, sending: asyncio.Future | None = None) -> Response:
        """A request nested too deep to decode: forwarded unchanged, the session (when the header or
        ``--session`` names it) marked with what was not recorded."""
        self.health.count("unrecordable")
        name = self._named_session(request)
        if name is not None:
            self._track(self._submit(self.store.record_outcome, name, (
                f"{request.url.path}: a request nested deeper than the decoder reads was forwarded but not recorded"),
                NOT_RECORDED))
        log.warning("ctxledger proxy: a request to %s nests JSON too deeply to record; forwarded unrecorded", request.url.path)
        return await self._forward_plain(request, body, sending)

    async def _relay(self, resp: UpstreamResponse, call: _Call, meta: dict[str, Any], started: float) -> AsyncIterator[bytes]:
        """Pass the stream through event by event; record the assembled reply before the final event."""
        name, api = call.name, call.api
        splitter = SSESplitter()
        assembler = stream_assembler(api)
        held: list[bytes] = []  # the terminal event and anything after it
        finished = False
        try:
            try:
                async for chunk in resp.aiter_raw():
                    out = []
                    for raw, event, data in splitter.feed(chunk):
                        assembler.feed(event, data)
                        if held or assembler.is_terminal(event, data):
                            held.append(raw)
                        else:
                            out.append(raw)
                    if out:
                        yield b"".join(out)
            except UpstreamError as e:
                meta["upstream_error"] = str(e)[:300]
            held.append(splitter.rest())
            meta["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
            if not assembler.done:
                meta["partial"] = True
            if assembler.skipped:
                meta["unrecorded_events"] = assembler.skipped
            await self._settle(self._submit(self.store.record_reply, name, api, assembler.reply(), meta), "recording a reply")
            finished = True
            tail = b"".join(held)
            if tail:
                yield tail
        finally:
            if not finished:
                # The client went away mid-stream: record what arrived, off this cancelled task.
                meta["partial"] = True
                meta["client_disconnected"] = True
                meta["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
                self._track(self._submit(self.store.record_reply, name, api, assembler.reply(), meta))
            self._track(asyncio.ensure_future(resp.aclose()))


def _decode_reply(content: bytes) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """A non-streamed reply body as a dict, or (None, the mark saying why it is not recorded)."""
    if json_too_deep(content, MAX_MESSAGE_DEPTH + 4):  # the body and its choices/content lists
        return None, (NOT_RECORDED, f"the model's reply reached the client but was not recorded: "
                                    f"it nests JSON deeper than {MAX_MESSAGE_DEPTH} levels")
    try:
        reply = json.loads(content)
    except ValueError:
        return None, (NOT_RECORDED, "the model's reply reached the client but was not recorded: it is not JSON")
    if not isinstance(reply, dict):
        return None, (NOT_RECORDED, "the model's reply reached the client but was not recorded: it is not a JSON object")
    return reply, None


def _with_buffer(body: bytes, api: str, rendered: Any) -> bytes:
    """The request body with the session's rendered buffer in place of the client's history."""
    data = json.loads(body)
    if api == "openai":
        data["messages"] = rendered
    else:
        data["messages"] = rendered["messages"]
        if rendered.get("system"):
            data["system"] = rendered["system"]
        else:
            data.pop("system", None)
    return json.dumps(data, ensure_ascii=False).encode()


def create_app(config: ProxyConfig, open_ledger: Callable[[], Any]) -> Starlette:
    """The proxy as an ASGI app; ``open_ledger()`` is called once, on the proxy's store thread."""
    proxy = _Proxy(config, open_ledger)
    routes = [
        Route("/ctxledger/health", proxy.health_route, methods=["GET"]),
        *(Route(path, proxy.chat, methods=["POST"]) for path in CHAT_PATHS),
        Route("/{path:path}", proxy.passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    ]
    guard = Middleware(
        Guard, token=config.token, allowed_hosts=config.allowed_hosts, allowed_origins=config.allowed_origins,
        recorded=lambda path: path in CHAT_PATHS, refused=lambda kind: proxy.health.count("refused"),
    )
    app = Starlette(routes=routes, lifespan=proxy.lifespan, middleware=[guard, Middleware(_RecordedCalls, proxy=proxy)])
    app.state.proxy = proxy
    return app


class _RecordedCalls:
    """ASGI middleware behind the guard: a POST to a recorded path goes straight to ``_Proxy.chat``,
    past Starlette's router and its per-request wrappers (four awaited layers a call); the same
    handler the route names, so what it answers is unchanged."""

    def __init__(self, app: Any, *, proxy: _Proxy):
        self.app = app
        self.proxy = proxy

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in CHAT_PATHS:
            response = await self.proxy.chat(Request(scope, receive, send))
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
