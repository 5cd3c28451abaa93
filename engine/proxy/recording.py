"""The proxy's side of the store: one thread that owns the ledger, a ``MessageRecorder`` per session,
retries on optimistic-concurrency conflicts, and a health record of every store failure.

Nothing here ever raises into a request: a store failure is logged loudly, counted, shown by
``GET /ctxledger/health``, and the agent's call goes on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from engine.errors import ConcurrencyError, DuplicateSessionError, ImportFormatError, UnknownSessionError
from engine.importers.messages import Message, MessageRecorder, RequestRecord, reply_messages
from engine.otel import live
from engine.proxy.following import Follower
from engine.proxy.naming import ConversationIndex

__all__ = ["Health", "StoreWorker", "CONFLICT_RETRIES", "UPSTREAM_ERROR", "NOT_RECORDED"]

log = logging.getLogger("ctxledger.proxy")
calls_log = logging.getLogger("ctxledger.proxy.calls")  # one INFO line per proxied call (``--quiet``: off)
T = TypeVar("T")
CONFLICT_RETRIES = 8
RECORDERS_KEPT = 256  # sessions kept in memory (each holds its client's view and its last request's raw messages)
UPSTREAM_ERROR = "proxy:upstream-error"  # a mark: the call got no reply (its reason says why)
NOT_RECORDED = "proxy:not-recorded"  # a mark: something the call carried could not be recorded (why)
_OWNERS_LIMIT = 100_000  # reply hashes remembered to follow a conversation after the client compacts


class Health:
    """Counters and the last store failure, as ``GET /ctxledger/health`` reports them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {
            "requests": 0,  # chat requests seen
            "recorded_requests": 0,
            "recorded_replies": 0,
            "partial_replies": 0,
            "passthrough": 0,  # other paths, forwarded unrecorded
            "not_chat": 0,  # chat paths whose body was not a chat request (forwarded, counted)
            "unrecordable": 0,  # chat requests whose messages were malformed (forwarded)
            "upstream_errors": 0,
            "store_errors": 0,
            "store_slow": 0,  # store operations the call stopped waiting for (they finish later)
            "conflict_retries": 0,
            # compactions seen in the traffic (the client's summaries, the provider's compactions) and
            # run by --compact: attempted = done + refused (a summary of a summary is refused)
            "compactions_attempted": 0,
            "compactions_refused": 0,
            "compactions_done": 0,
            "too_large": 0,  # request bodies over the limit (413, not forwarded)
            "refused": 0,  # requests the guard refused (browser origin, foreign Host, no token, not JSON)
        }
        self.last_store_error: dict[str, Any] | None = None
        self.store_failing = False
        self.store_lagging = False
        self.started = time.time()

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def store_error(self, what: str, session: str, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self.lock:
            self.counts["store_errors"] += 1
            self.store_failing = True
            self.last_store_error = {"at": time.time(), "while": what, "session": session, "error": message[:500]}

    def store_ok(self) -> None:
        self.store_failing = False
        self.store_lagging = False

    def store_slow(self, what: str) -> None:
        with self.lock:
            self.counts["store_slow"] += 1
            self.store_lagging = True

    def report(self) -> dict[str, Any]:
        with self.lock:
            return {
                "status": "degraded" if self.store_failing or self.store_lagging else "ok",
                "store_failing": self.store_failing,
                "store_lagging": self.store_lagging,
                "uptime_s": round(time.time() - self.started, 1),
                "counts": dict(self.counts),
                "last_store_error": self.last_store_error,
            }


class StoreWorker:
    """Runs every store operation on one thread, in submission order (so a session's request is
    recorded before its reply), and keeps the per-session recorders."""

    def __init__(self, open_ledger: Callable[[], Any], health: Health, *, permissive: bool = False):
        self._open_ledger = open_ledger
        self.health = health
        self.permissive = permissive
        self.ledger: Any = None
        self._recorders: OrderedDict[str, MessageRecorder] = OrderedDict()  # most recently used last
        self._owners: OrderedDict[str, str] = OrderedDict()  # reply message hash -> session name
        self._unrecordable: set[str] = set()  # sessions whose last request had malformed messages
        self._responses: OrderedDict[str, str] = OrderedDict()  # Responses API response id -> session name
        self._requests: dict[str, RequestRecord | None] = {}  # a streamed call's request, until its reply
        self.follow = Follower()  # conversations recorded without a header, for their rewrites
        self._seen: set[str] = set()  # every session this proxy has recorded into
        # Session names are stored in clear: in an encrypted store, conversations get random names
        self.plaintext = True
        self.conversations = ConversationIndex()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxledger-store")

    # -- running on the store thread ----------------------------------------------------------

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Queue work without waiting for it (a disconnected client's partial reply)."""
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self.ledger is not None:
            try:
                self.ledger.close()
            except Exception:  # pragma: no cover - closing a broken store
                log.exception("ctxledger proxy: closing the store failed")

    def open(self) -> None:
        if self.ledger is None:
            self.ledger = self._open_ledger()
            self.plaintext = bool(getattr(self.ledger.store, "transparent", True))
            if not self.plaintext:
                self.conversations.load(self.ledger)

    def recorder(self, name: str) -> MessageRecorder:
        rec = self._recorders.get(name)
        if rec is not None:
            self._recorders.move_to_end(name)
            return rec
        self.open()
        try:
            session = self.ledger.session(name)
        except UnknownSessionError:
            try:
                session = self.ledger.create_session(
                    name, strict=not self.permissive, by="proxy", reason="first request of this conversation"
                )
            except DuplicateSessionError:  # another proxy created it a moment ago
                session = self.ledger.session(name)
        rec = self._recorders[name] = MessageRecorder(session, by="client", reply_by="model", lenient=True)
        self._seen.add(name)
        while len(self._recorders) > RECORDERS_KEPT:  # an idle session is read back when it returns
            self._recorders.popitem(last=False)
        return rec

    def _guard(self, what: str, name: str, fn: Callable[[MessageRecorder], T]) -> T | None:
        """Run ``fn`` on the session's recorder; retry on conflicts; never raise (but malformed
        messages, ``ImportFormatError``, which the caller handles)."""
        for _ in range(CONFLICT_RETRIES):
            try:
                result = fn(self.recorder(name))
            except ConcurrencyError:
                self.health.count("conflict_retries")
                continue  # the recorder re-read the session; diff again
            except ImportFormatError as e:
                self.health.count("unrecordable")
                log.warning("ctxledger proxy: %s for session %r not recorded: %s", what, name, e)
                raise
            except Exception as e:
                self.health.store_error(what, name, e)
                log.error("ctxledger proxy: STORE ERROR while %s for session %r; the call was forwarded "
                          "unrecorded", what, name, exc_info=True)
                self._recorders.pop(name, None)  # read it back from the store next time
                return None
            self.health.store_ok()
            live.recorded(self._recorders[name].session)  # OpenTelemetry live export: a no-op unless enabled
            return result
        self.health.store_error(what, name, f"gave up after {CONFLICT_RETRIES} concurrency conflicts")
        log.error("ctxledger proxy: STORE ERROR while %s for session %r: too many conflicts", what, name)
        return None

    # -- the operations the app asks for ------------------------------------------------------

    def _compactions(self, *records: RequestRecord | None) -> None:
        done = sum(len(r.derived) for r in records if r is not None)
        refused = sum(len(r.refused) for r in records if r is not None)
        if done or refused:
            self.health.count("compactions_attempted", done + refused)
            self.health.count("compactions_done", done)
            self.health.count("compactions_refused", refused)

    def _followed(self, name: str, *records: RequestRecord | None) -> None:
        rec = self._recorders.get(name)
        if rec is None or not self.follow.tracks(name):  # a named session needs no following
            return
        live = rec.session.state.live
        spans = [live[i] for r in records if r is not None for i in r.observed if i in live]
        replies = [x.text for x in spans if x.role == "assistant" and x.kind == "message"]
        self.follow.recorded(name, [x.text for x in spans], len(rec.hashes), replies)

    def _log_call(self, name: str, api: str, meta: dict[str, Any], *records: RequestRecord | None) -> None:
        if not calls_log.isEnabledFor(logging.INFO):
            return
        got = [r for r in records if r is not None]
        said = [f"+{sum(len(r.observed) for r in got)} observed"]
        for what, n in (("pruned", sum(len(r.pruned) for r in got)), ("derived", sum(len(r.derived) for r in got)),
                        ("refused", sum(len(r.refused) for r in got))):
            if n:
                said.append(f"{n} {what}")
        latency = meta.get("latency_ms")
        args = (api, meta.get("status", "-"), name, ", ".join(said) if got else "not recorded",
                f" ({latency:.0f} ms)" if isinstance(latency, (int, float)) else "")
        try:  # written after the call's own store work, which the client is waiting for
            self._pool.submit(calls_log.info, "%s %s %s: %s%s", *args)
        except RuntimeError:  # the store thread is shutting down
            calls_log.info("%s %s %s: %s%s", *args)

    def response_owner(self, response_id: str) -> str | None:
        """The session that recorded this Responses API response (a ``previous_response_id``)."""
        return self._responses.get(response_id)

    def _remember_response(self, name: str, api: str, reply: Any) -> None:
        if api == "responses" and isinstance(reply, dict) and isinstance(reply.get("id"), str):
            self._responses[reply["id"]] = name
            while len(self._responses) > _OWNERS_LIMIT:
                self._responses.popitem(last=False)

    def record_request(self, name: str, api: str, messages: list[Any], system: Any, meta: dict[str, Any],
                       append: bool = False) -> RequestRecord | None:
        self._unrecordable.discard(name)
        try:
            rec = self._guard(
                "recording a request", name,
                lambda r: r.record_request(messages, api=api, system=system, meta=meta, append=append),
            )
        except ImportFormatError as e:
            self._unrecordable.add(name)  # its reply answers messages the ledger does not have
            self.record_outcome(name, f"a request was forwarded but not recorded: {e.message}", NOT_RECORDED)
            return None
        if rec is not None:
            self.health.count("recorded_requests")
            self._compactions(rec)
            self._followed(name, rec)
        self._requests[name] = rec
        return rec

    def record_reply(self, name: str, api: str, reply: dict[str, Any], meta: dict[str, Any],
                     compacted: bool = False) -> RequestRecord | None:
        request = self._requests.pop(name, None)
        if name in self._unrecordable:
            self._unrecordable.discard(name)
            self.health.count("unrecordable")
            self._log_call(name, api, meta)
            return None
        try:
            parsed = reply_messages(reply, api, lenient=True)
            rec = self._guard("recording a reply", name,
                              lambda r: r.record_reply(reply, api=api, meta=meta, compacted=compacted, parsed=parsed))
        except ImportFormatError as e:
            self.record_outcome(name, f"the model's reply reached the client but was not recorded: {e.message}", NOT_RECORDED)
            return None
        if rec is not None:
            self.health.count("partial_replies" if meta.get("partial") else "recorded_replies")
            self._compactions(rec)
            self._followed(name, rec)
            self._remember_reply(name, parsed[0], api)
            self._remember_response(name, api, reply)
        self._log_call(name, api, meta, request, rec)
        return rec

    def record_exchange(
        self, name: str, api: str, messages: list[Any], system: Any, meta: dict[str, Any], append: bool,
        reply: dict[str, Any] | None, reply_meta: dict[str, Any], outcome: tuple[str, str] | None = None,
        compacted: bool = False,
    ) -> tuple[RequestRecord, RequestRecord | None] | None:
        """A whole non-streamed call in ONE transaction (one durable commit): the request's diff,
        then the reply, or the outcome (a mark's label and reason) of a call that got none."""
        parsed = None  # the reply read once: checked here, recorded and remembered below
        if reply is not None:
            try:
                parsed = reply_messages(reply, api, lenient=True)
            except ImportFormatError as e:
                self.health.count("unrecordable")
                reply = None
                outcome = outcome or (NOT_RECORDED, f"the model's reply reached the client but was not recorded: {e.message}")

        def run(r: MessageRecorder) -> tuple[RequestRecord, RequestRecord | None]:
            try:
                with r.session.batch():
                    req = r.record_request(messages, api=api, system=system, meta=meta, append=append)
                    rep = (r.record_reply(reply, api=api, meta=reply_meta, compacted=compacted, parsed=parsed)
                           if reply is not None else None)
                    if outcome:
                        r.session.mark(outcome[0], by="proxy", reason=outcome[1][:2000])
            except BaseException:
                r.resync(refresh=True)  # the batch may have failed as a whole when it was saved
                raise
            return req, rep

        try:
            done = self._guard("recording a call", name, run)
        except ImportFormatError as e:
            self.record_outcome(name, f"a call was forwarded but not recorded: {e.message}", NOT_RECORDED)
            self._log_call(name, api, reply_meta)
            return None
        if done is not None:
            self.health.count("recorded_requests")
            self._compactions(*done)
            self._followed(name, *done)
            if done[1] is not None:
                self.health.count("recorded_replies")
                self._remember_reply(name, parsed[0], api)
                self._remember_response(name, api, reply)
            self._log_call(name, api, reply_meta, *done)
        return done

    def _remember_reply(self, name: str, messages: list[Message], api: str) -> None:
        """The reply's message (a Responses reply: its last assistant text) as this session's, by hash."""
        if api == "responses":
            said = [m for m in messages if m.role == "assistant" and any(p.kind == "message" for p in m.parts)]
            message = said[-1] if said else None
        else:
            message = messages[0] if messages else None
        if message is not None:
            self._owners[message.hash] = name
            self._owners.move_to_end(message.hash)
            while len(self._owners) > _OWNERS_LIMIT:
                self._owners.popitem(last=False)

    def record_outcome(self, name: str, reason: str, label: str = UPSTREAM_ERROR) -> None:
        """A call that produced no reply (upstream error, timeout), or what a call carried that could
        not be recorded: a mark whose reason says why."""
        self._guard("recording an outcome", name, lambda r: r.session.mark(label, by="proxy", reason=reason[:2000]))

    def owner_of(self, hashes: list[str]) -> str | None:
        """The session that recorded one of these replies (a conversation the client compacted)."""
        for h in hashes:
            name = self._owners.get(h)
            if name is not None:
                return name
        return None

    def open_sessions(self) -> int:
        return len(self._recorders)

    def known(self, name: str) -> bool:
        return name in self._seen

    def compact_and_render(self, name: str, api: str, compactor_for: Callable[[], Any]) -> Any:
        """Run a compaction step on the session and render its live buffer for the upstream API."""

        def step(r: MessageRecorder) -> Any:
            compactor = compactor_for()
            try:
                result = compactor.step(r.session)
                if result.compacted:
                    self.health.count("compactions_attempted")
                    self.health.count("compactions_done")
            except ConcurrencyError:
                raise
            except Exception as e:  # a refused or failed compaction: send the buffer as it is
                self.health.count("compactions_attempted")
                self.health.count("compactions_refused")
                log.warning("ctxledger proxy: compaction of %r did not run: %s", name, e)
            return r.session.render(api)

        return self._guard("compacting", name, step)
