"""``ctxledger serve``: a read-only web app for replaying sessions, on Starlette.

``create_app(ledger)`` returns the ASGI app. Routes (the first four are the documented contract):

    GET /                               the sessions page
    GET /s/<session>?at=<n>             the session page at position n (default: the head)
    GET /api/s/<session>/at/<n>         the buffer at n as JSON
    GET /api/s/<session>/audit          the audit as JSON
    GET /api/sessions                   the sessions as JSON
    GET /api/s/<session>/curve          live tokens over the log, with markers (JSON)
    GET /api/s/<session>/seek?from=n&dir=1|-1   the end of the next / previous compaction
    GET /api/s/<session>/span/<id>?at=n the span panel's data (JSON)
    GET /api/s/<session>/blame?q=..&at=n        blame (JSON)
    GET /api/s/<session>/integrity      the hash chain's verdict for the head (JSON, kept per head)
    GET /api/s/<session>/conversation?at=n      the log as a chat, the window ending at n (JSON)
    GET /api/s/<session>/search?q=..&role=&kind=&provenance=&findings=1   search over the whole log (JSON)
    GET /search?q=..&role=&kind=&provenance=&findings=1 (/api/search: JSON)  the same over every session
    GET /api/s/<session>/head           the head now (the page polls it to follow a live session)
    GET /api/s/<session>/lost/<id>?at=n what the compaction that wrote summary <id> dropped (JSON)
    GET /compare?a=S&at_a=n&b=T&at_b=m  two buffers side by side, aligned by turn (/api/compare: JSON)
    GET /s/<session>/state|span/<id>|lineage/<id>|blame|diff|conversation|search  the HTML fragments the script swaps in

A session name is one percent-encoded path segment (``/s/x%2Fstate`` is session ``x/state``;
``/s/x/state`` is session ``x``'s state fragment): see ``engine.viewer.routing``.

Unknown sessions, spans and positions are 404 with the ledger's own message; other bad input 400;
a store that cannot be read 503. Nothing here writes to the log. Each request opens the session's
head (a snapshot read) and, for a position, ``s.at(n)``: no request reads the whole log except
the curve (once per session head, cached), blame, lineage, diff and audit, which are whole-log
folds by nature and run only when asked for.

Access: with ``token`` set, every request must carry it (``?token=``, which also sets an HttpOnly
cookie for the page's own requests, a ``ctxledger_token`` cookie, or ``Authorization: Bearer``).
Without a token only loopback Host headers are answered (a web page elsewhere cannot reach the
app through DNS rebinding).
"""

from __future__ import annotations

import hmac
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import msgspec

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Route
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("ctxledger serve needs Starlette and uvicorn: pip install 'ctxledger[serve]'") from None

from engine.errors import (
    InvalidInputError,
    LedgerError,
    PositionOutOfRangeError,
    SpanError,
    SpanStateError,
    StorageError,
    UnknownSessionError,
)
from engine.viewer import data, pages, views
from engine.viewer.assets import CSS, JS
from engine.viewer.cache import CurveCache
from engine.viewer.compare import compare
from engine.viewer.conversation import conversation
from engine.viewer.routing import routed, segment
from engine.viewer.search import open_search_index, search, search_all

if TYPE_CHECKING:
    from engine.ledger import Ledger

__all__ = ["LOOPBACK_HOSTS", "TOKEN_COOKIE", "create_app"]

_NUMBER = re.compile(r"-?[0-9]+")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
TOKEN_COOKIE = "ctxledger_token"
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def _status(e: LedgerError) -> int:
    if isinstance(e, (UnknownSessionError, PositionOutOfRangeError, SpanError)):
        return 404
    if isinstance(e, StorageError):
        return 503
    return 400


class _Viewer:
    """The routes' shared state: the ledger, the curve cache and the fleet view's rows."""

    def __init__(self, ledger: Ledger, *, fleet: bool):
        self.ledger = ledger
        self.curves = CurveCache()
        self.verdicts = CurveCache(size=64)
        self.heads = CurveCache(size=4096)  # the sessions page's numbers per (session id, head position)
        self.opened = CurveCache(size=256)  # sessions opened at a head, for the search over every session
        self._index: Any = None
        self.fleet_enabled = fleet
        self.fleet_rows: dict[str, Any] | None = None
        self.fleet_note = "drift findings: the fleet view is off (--no-fleet); showing violations recorded in the log."
        self._fleet_thread: threading.Thread | None = None
        self._fleet_lock = threading.Lock()
        if fleet:
            self.fleet_note = "drift findings: the fleet view is catching up…"
            self.refresh_fleet()

    # -- the fleet view, caught up in the background (never on a request's time) -------------------

    def refresh_fleet(self) -> None:
        with self._fleet_lock:
            if not self.fleet_enabled or (self._fleet_thread is not None and self._fleet_thread.is_alive()):
                return
            self._fleet_thread = threading.Thread(target=self._catch_up, name="ctxledger-fleet", daemon=True)
            self._fleet_thread.start()

    def _catch_up(self) -> None:
        from engine.fleet import Fleet

        try:
            with Fleet(self.ledger) as fleet:
                fleet.catch_up()
                self.fleet_rows = {r.name: r for r in fleet.rows()}
            self.fleet_note = "drift findings: from the fleet view (audited when a session's summaries change)."
        except LedgerError as e:
            self.fleet_enabled = False
            self.fleet_note = f"drift findings: no fleet view ({e.message}); showing violations recorded in the log."
        except Exception as e:  # a background thread: say what happened on the page, never crash the app
            self.fleet_note = f"drift findings: the fleet view could not be updated ({type(e).__name__}: {e}); try again later."

    # -- reading ----------------------------------------------------------------------------------

    def session(self, name: str):
        return self.ledger.session(name)

    def search_index(self) -> Any:
        with self._fleet_lock:
            if self._index is None:
                self._index = open_search_index(self.ledger)
            return self._index

    def open_at_head(self, info: Any) -> Any:
        """The session at the head the sessions projection names, opened once per head position (a
        search over every session would otherwise replay each session's tail on every request)."""
        return self.opened.get((info.id, info.position), lambda: self.ledger.session(info.id))

    def fleet_row(self, name: str) -> Any:
        return (self.fleet_rows or {}).get(name)

    def exists(self, name: str) -> bool:
        try:
            self.ledger.session(name)
        except LedgerError:
            return False
        return True

    def integrity(self, s: Any) -> dict[str, Any]:
        """The hash chain's verdict for the session's head (a whole-log walk, kept per head)."""
        return self.verdicts.get((s.id, s.position), lambda: data.integrity(s))

    def position(self, s: Any, raw: str | None) -> int:
        if raw is None or raw == "":
            return s.position
        if raw.lstrip("-").isdigit() and not _NUMBER.fullmatch(raw):  # "--1": not a number, nor a mark
            raise InvalidInputError(f"position must be a number or a mark; got {raw!r}")
        return s.resolve_position(raw)


def _query(request: Request, key: str) -> str | None:
    return request.query_params.get(key)


def _param(request: Request, key: str) -> str:
    return segment(request.path_params[key])


def _whole_name(request: Request) -> str | None:
    """For ``/s/a/b/c``: the session name ``a/b/c`` written with bare slashes (an old or hand-typed
    link), when the viewer's own sub-page reading of the path named no session."""
    raw = request.scope.get("raw_path", b"").decode("latin-1")
    if not raw.startswith("/s/") or raw.count("/") < 3:
        return None
    try:
        return segment(raw[3:].rstrip("/"))
    except InvalidInputError:
        return None


def _html(handler: Callable[[_Viewer, Request], str]) -> Callable:
    def endpoint(request: Request) -> Response:
        v: _Viewer = request.app.state.viewer
        try:
            return HTMLResponse(handler(v, request))
        except LedgerError as e:
            if isinstance(e, UnknownSessionError):
                whole = _whole_name(request)
                if whole is not None and v.exists(whole):
                    return RedirectResponse(pages.url("s", whole) + ("?" + request.url.query if request.url.query else ""),
                                            status_code=307)
            status = _status(e)
            return HTMLResponse(pages.error_page(status, e.message), status_code=status)

    return endpoint


def _json(handler: Callable[[_Viewer, Request], Any]) -> Callable:
    def endpoint(request: Request) -> Response:
        v: _Viewer = request.app.state.viewer
        try:
            body = msgspec.json.encode(handler(v, request), enc_hook=str)
        except LedgerError as e:
            status = _status(e)
            body = msgspec.json.encode({"error": e.message, "type": type(e).__name__, "status": status})
            return Response(body, status_code=status, media_type="application/json")
        return Response(body, media_type="application/json")

    return endpoint


# -- pages -----------------------------------------------------------------------------------------


def sessions_page(v: _Viewer, request: Request) -> str:
    v.refresh_fleet()
    return pages.sessions_page(data.session_rows(v.ledger, v.fleet_rows, heads=v.heads), fleet_note=v.fleet_note)


def session_page(v: _Viewer, request: Request) -> str:
    s = v.session(_param(request, "name"))
    n = v.position(s, _query(request, "at"))
    view = s.at(n)
    state = pages.state_fragment(data.buffer_json(view, s.position))
    return pages.session_page(s.name, n, s.position, state, {k: p for k, p in s.marks().items()})


def state_fragment(v: _Viewer, request: Request) -> str:
    s = v.session(_param(request, "name"))
    view = s.at(v.position(s, _query(request, "at")))
    return pages.state_fragment(data.buffer_json(view, s.position))


def _span_detail(v: _Viewer, request: Request, *, with_lineage: bool = True) -> dict[str, Any]:
    s = v.session(_param(request, "name"))
    n = v.position(s, _query(request, "at"))
    return data.span_detail(s, n, _param(request, "span_id"), with_lineage=with_lineage)


def span_fragment(v: _Viewer, request: Request) -> str:
    return pages.span_fragment(_span_detail(v, request, with_lineage=False))


def lineage_fragment(v: _Viewer, request: Request) -> str:
    s = v.session(_param(request, "name"))
    view = s.at(v.position(s, _query(request, "at")))
    return pages.lineage_fragment(data.lineage_json(view.lineage(_param(request, "span_id"))))


def _lost(v: _Viewer, request: Request) -> dict[str, Any]:
    s = v.session(_param(request, "name"))
    view = s.at(v.position(s, _query(request, "at")))
    span_id = _param(request, "span_id")
    # a fold over every original of the summary (seconds for hundreds): kept per session and summary
    made = view.state.live[span_id].position if span_id in view.state.live else view.position
    return v.verdicts.get(("lost", s.id, span_id, made), lambda: data.lost_json(view, span_id))


def grounding_fragment(v: _Viewer, request: Request) -> str:
    s = v.session(_param(request, "name"))
    n = v.position(s, _query(request, "at"))
    span_id = _param(request, "span_id")
    view = s.at(n)
    made = view.state.live[span_id].position if span_id in view.state.live else n
    d = v.verdicts.get(("grounding", s.id, span_id, made),
                       lambda: data.span_detail(s, n, span_id, with_lineage=False, grounding=True))
    if d.get("grounding") is None:
        raise SpanStateError(f"{span_id} is not a derived span: only summaries are checked against their sources")
    return pages.grounding_fragment(d["grounding"])


def lost_fragment(v: _Viewer, request: Request) -> str:
    return pages.lost_fragment(_lost(v, request))


def api_lost(v: _Viewer, request: Request) -> Any:
    return _lost(v, request)


def _blame(v: _Viewer, request: Request) -> tuple[str, list[Any]]:
    s = v.session(_param(request, "name"))
    n = v.position(s, _query(request, "at"))
    q = _query(request, "q") or ""
    if len(q) > 500:
        raise InvalidInputError("blame text is longer than 500 characters")
    return q, s.blame(q, at=n)


def blame_fragment(v: _Viewer, request: Request) -> str:
    q, hits = _blame(v, request)
    return pages.blame_fragment(q, hits)


def diff_fragment(v: _Viewer, request: Request) -> str:
    s = v.session(_param(request, "name"))
    a = v.position(s, _query(request, "a") or "1")
    b = v.position(s, _query(request, "b"))
    return pages.diff_fragment(s.diff(a, b))


def unrouted(v: _Viewer, request: Request) -> str:
    """``/s/a/b`` that is no sub-page: a session name with bare slashes (redirected when it exists)."""
    name = _whole_name(request) or request.path_params["rest"]
    raise UnknownSessionError(f"no session named {name!r} (a session name is one URL segment: /s/{pages.url(name)[1:]})")


def _conversation(v: _Viewer, request: Request) -> dict[str, Any]:
    s = v.session(_param(request, "name"))
    return conversation(s, v.position(s, _query(request, "at")), fleet_row=v.fleet_row(s.name))


def conversation_fragment(v: _Viewer, request: Request) -> str:
    return views.conversation_fragment(_conversation(v, request))


def _search(v: _Viewer, request: Request) -> dict[str, Any]:
    s = v.session(_param(request, "name"))
    q = request.query_params
    return search(v.search_index(), s, q.get("q") or "", role=q.get("role") or "", kind=q.get("kind") or "",
                  provenance=q.get("provenance") or "", findings_only=q.get("findings") in ("1", "on", "true"),
                  fleet_row=v.fleet_row(s.name))


def search_fragment(v: _Viewer, request: Request) -> str:
    return views.search_fragment(_search(v, request))


def _search_all(v: _Viewer, request: Request) -> dict[str, Any]:
    q = request.query_params
    return search_all(v.search_index(), v.ledger, q.get("q") or "", role=q.get("role") or "", kind=q.get("kind") or "",
                      provenance=q.get("provenance") or "", findings_only=q.get("findings") in ("1", "on", "true"),
                      fleet_rows=v.fleet_rows, open_session=v.open_at_head)


def search_page(v: _Viewer, request: Request) -> str:
    if not (request.query_params.get("q") or "").strip():
        return views.search_page(None)  # the form alone
    return views.search_page(_search_all(v, request))


def api_search_all(v: _Viewer, request: Request) -> Any:
    return _search_all(v, request)


def _compare(v: _Viewer, request: Request) -> dict[str, Any]:
    q = request.query_params
    a_name = q.get("a") or ""
    b_name = q.get("b") or a_name
    if not a_name:
        raise InvalidInputError("compare needs ?a=SESSION (and b=SESSION, at_a=N, at_b=M)")
    a, b = v.session(a_name), v.session(b_name)
    at_a = v.position(a, q.get("at_a"))
    at_b = v.position(b, q.get("at_b") or (q.get("at_a") if b_name != a_name else None))
    return compare(a.at(at_a), b.at(at_b))


def compare_page(v: _Viewer, request: Request) -> str:
    cmp = _compare(v, request)
    # the form's session names: the store's sessions projection, one small read (no log scan)
    names = [i.name for i in v.ledger.sessions()]
    return views.compare_page(cmp, sorted({cmp["a"]["session"], cmp["b"]["session"], *names}))


# -- JSON --------------------------------------------------------------------------------------------


def api_sessions(v: _Viewer, request: Request) -> Any:
    return {"sessions": data.session_rows(v.ledger, v.fleet_rows, heads=v.heads)}


def api_at(v: _Viewer, request: Request) -> Any:
    s = v.session(_param(request, "name"))
    raw = request.path_params["n"]
    if not _NUMBER.fullmatch(raw):
        raise InvalidInputError(f"position must be a number; got {raw!r}")
    n = s.resolve_position(raw)
    return data.buffer_json(s.at(n), s.position)


def api_audit(v: _Viewer, request: Request) -> Any:
    s = v.session(_param(request, "name"))
    return msgspec.to_builtins(s.audit(at=v.position(s, _query(request, "at"))), enc_hook=str)


def api_curve(v: _Viewer, request: Request) -> Any:
    s = v.session(_param(request, "name"))
    # kept encoded: a million-event curve is thousands of points, encoded once per session head
    return v.curves.get((s.id, s.position), lambda: msgspec.Raw(msgspec.json.encode(data.curve(s))))


def api_seek(v: _Viewer, request: Request) -> Any:
    s = v.session(_param(request, "name"))
    n = v.position(s, _query(request, "from"))
    direction = _query(request, "dir") or "1"
    if direction not in ("1", "-1"):
        raise InvalidInputError(f"dir must be 1 or -1; got {direction!r}")
    found = data.seek_compaction(s, n, int(direction))
    word = "next" if direction == "1" else "previous"
    return {
        "from": n,
        "position": found,
        "message": "" if found else f"no {word} compaction within {data.SEEK_LIMIT:,} events of position {n:,}",
    }


def api_conversation(v: _Viewer, request: Request) -> Any:
    return _conversation(v, request)


def api_search(v: _Viewer, request: Request) -> Any:
    return _search(v, request)


def api_compare(v: _Viewer, request: Request) -> Any:
    return _compare(v, request)


def api_head(v: _Viewer, request: Request) -> Any:
    """The session's head now: the page polls it to follow a session still being written."""
    s = v.session(_param(request, "name"))
    return {"session": s.name, "head": s.position, "tokens": s.tokens}


def api_integrity(v: _Viewer, request: Request) -> Any:
    return v.integrity(v.session(_param(request, "name")))


def api_span(v: _Viewer, request: Request) -> Any:
    return _span_detail(v, request)


def api_blame(v: _Viewer, request: Request) -> Any:
    q, hits = _blame(v, request)
    return {"query": q, "hits": msgspec.to_builtins(hits, enc_hook=str)}


def _static(body: str, media_type: str) -> Callable:
    def endpoint(request: Request) -> Response:
        return Response(body, media_type=media_type, headers={"cache-control": "no-cache"})

    return endpoint


# -- access ------------------------------------------------------------------------------------------


class _Guard:
    """Every request: the token when one is set, else a loopback Host header; and the security
    headers and a ``Server-Timing`` header (the time from the request to its response) on every
    response."""

    def __init__(self, app: Any, token: str | None):
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        set_cookie = False
        if self.token is not None:
            offered = _offered_token(scope, headers)
            if offered is None or not hmac.compare_digest(offered.encode(), self.token):
                return await _deny(send, 401, "a valid token is required: open the URL that `ctxledger serve` printed "
                                   "(it ends in ?token=...)")
            set_cookie = "token" in parse_qs(scope.get("query_string", b"").decode("latin-1"))
        else:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.lower() not in LOOPBACK_HOSTS:
                return await _deny(send, 403, f"this viewer answers loopback hosts only (got Host {host!r}); "
                                   "serve with --host and --token to share it")
        token = self.token

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                         if not any(h[0].lower() == k.encode() for h in message.get("headers", []))]
                # the server's own time for this request (browsers show it; benchmarks read it)
                extra.append((b"server-timing", f"app;dur={(time.perf_counter() - t0) * 1000:.2f}".encode()))
                if set_cookie and token is not None:
                    extra.append((b"set-cookie", TOKEN_COOKIE.encode() + b"=" + token + b"; HttpOnly; SameSite=Strict; Path=/"))
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(routed(scope), receive, send_with_headers)


def _offered_token(scope: dict, headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if "token" in query:
        return query["token"][0]
    for part in headers.get("cookie", "").split(";"):
        k, _, val = part.strip().partition("=")
        if k == TOKEN_COOKIE:
            return val
    return None


async def _deny(send: Any, status: int, message: str) -> None:
    body = pages.error_page(status, message).encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the app -----------------------------------------------------------------------------------------


def create_app(ledger: Ledger, *, token: str | None = None, fleet: bool = True) -> Any:
    """The viewer as an ASGI app over ``ledger`` (read-only). ``token``: required on every request
    when set. ``fleet``: keep the store's fleet view caught up in the background for the sessions
    page's drift column (it writes the fleet view's own tables, never the log)."""
    routes = [
        Route("/", _html(sessions_page)),
        Route("/_static/viewer.css", _static(CSS, "text/css")),
        Route("/_static/viewer.js", _static(JS, "text/javascript")),
        Route("/api/sessions", _json(api_sessions)),
        Route("/api/search", _json(api_search_all)),
        Route("/search", _html(search_page)),
        Route("/api/s/{name}/at/{n}", _json(api_at)),
        Route("/api/s/{name}/audit", _json(api_audit)),
        Route("/api/s/{name}/curve", _json(api_curve)),
        Route("/api/s/{name}/seek", _json(api_seek)),
        Route("/api/s/{name}/span/{span_id}", _json(api_span)),
        Route("/api/s/{name}/blame", _json(api_blame)),
        Route("/api/s/{name}/integrity", _json(api_integrity)),
        Route("/api/s/{name}/conversation", _json(api_conversation)),
        Route("/api/s/{name}/search", _json(api_search)),
        Route("/api/s/{name}/head", _json(api_head)),
        Route("/api/s/{name}/lost/{span_id}", _json(api_lost)),
        Route("/s/{name}/lost/{span_id}", _html(lost_fragment)),
        Route("/s/{name}/grounding/{span_id}", _html(grounding_fragment)),
        Route("/api/compare", _json(api_compare)),
        Route("/compare", _html(compare_page)),
        Route("/s/{name}/conversation", _html(conversation_fragment)),
        Route("/s/{name}/search", _html(search_fragment)),
        Route("/s/{name}/state", _html(state_fragment)),
        Route("/s/{name}/span/{span_id}", _html(span_fragment)),
        Route("/s/{name}/lineage/{span_id}", _html(lineage_fragment)),
        Route("/s/{name}/blame", _html(blame_fragment)),
        Route("/s/{name}/diff", _html(diff_fragment)),
        Route("/s/{name}", _html(session_page)),
        Route("/s/{rest:path}", _html(unrouted)),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        message = f"nothing at {request.url.path!r}: try / for the sessions, /s/<session> for one session"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message, "status": 404}, status_code=404)
        return HTMLResponse(pages.error_page(404, message), status_code=404)

    app = Starlette(routes=routes, exception_handlers={404: not_found})
    app.state.viewer = _Viewer(ledger, fleet=fleet)
    return _Guard(app, token)
