"""Who may talk to the proxy: refused before anything is read, recorded or forwarded.

A web page can make a browser send a "simple" cross-origin POST (``text/plain``, no pre-flight) to
any address, and DNS rebinding lets it name the proxy under a host name of its own. The proxy's
clients are agents and SDKs, never browsers, so:

- a request that carries a browser's ``Origin`` (or ``Sec-Fetch-Site`` other than ``none``) is
  refused (403), unless its origin is in ``allowed_origins``;
- without a token, a request whose ``Host`` is not a loopback name (or one of ``allowed_hosts``) is
  refused (403): a rebound name never matches;
- with a token (required off loopback), every request carries it in ``X-Ctxledger-Token`` (401
  otherwise); the header is never forwarded;
- a POST to a recorded path whose ``Content-Type`` is not JSON is refused (415).

Each refusal is counted in the health report's ``refused`` and answered with a JSON error body.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["TOKEN_HEADER", "LOOPBACK_NAMES", "Guard", "host_name"]

TOKEN_HEADER = "x-ctxledger-token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def host_name(host: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8788`` -> ``::1``), lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class Guard:
    """ASGI middleware in front of the proxy's routes."""

    def __init__(
        self,
        app: Any,
        *,
        token: str | None,
        allowed_hosts: Collection[str] = (),
        allowed_origins: Collection[str] = (),
        recorded: Callable[[str], bool],
        refused: Callable[[str], None],
    ):
        self.app = app
        self.token = token.encode() if token else None
        self.hosts = LOOPBACK_NAMES | {h.lower() for h in allowed_hosts}
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.recorded = recorded
        self.refused = refused

    def check(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, error type, message) of a refusal, or None."""
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return 403, "forbidden_origin", (f"requests from a browser page (Origin {origin!r}) are refused; "
                                             "agents and SDKs send no Origin")
        site = headers.get("sec-fetch-site")
        if site is not None and site.lower() != "none" and origin is None:
            return 403, "forbidden_origin", f"requests a browser sends for a page (Sec-Fetch-Site {site!r}) are refused"
        if self.token is not None:
            offered = headers.get(TOKEN_HEADER, "").encode("latin-1")
            if not hmac.compare_digest(offered, self.token):
                return 401, "unauthorized", f"this proxy needs its token in the {TOKEN_HEADER} header"
        elif host_name(headers.get("host", "")) not in self.hosts:
            return 403, "forbidden_host", (f"this proxy answers loopback host names only (got Host "
                                           f"{headers.get('host', '')!r}); listen elsewhere with --token")
        if method == "POST" and self.recorded(path) and not _is_json(headers.get("content-type", "")):
            return 415, "unsupported_media_type", (f"a recorded call must be JSON (Content-Type: application/json), "
                                                   f"not {headers.get('content-type', 'none')!r}")
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.check(scope.get("method", "GET"), scope.get("path", ""), headers)
        if refusal is None:
            return await self.app(scope, receive, send)
        status, kind, message = refusal
        self.refused(kind)
        body = json.dumps({"error": {"type": kind, "message": f"ctxledger proxy: {message}"}}).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})
