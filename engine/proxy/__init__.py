"""``ctxledger proxy``: a recording (and optionally compacting) proxy for the OpenAI and Anthropic APIs.

Point an agent's base URL at the proxy and every chat call it makes — and every compaction it does to
its own history — is recorded in a ledger session, hash-chained and auditable, with no change to
the agent::

    from engine.proxy import ProxyConfig, create_app
    app = create_app(ProxyConfig(upstream="https://api.openai.com"), lambda: Ledger.open(url))

Needs the ``proxy`` extra (Starlette, uvicorn, httpx; httptools and uvloop make it faster, and it runs without them).
"""

try:
    import httpx  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(f"ctxledger proxy needs the proxy extra: pip install 'ctxledger[proxy]' ({e.name} is missing)") from None

from engine.proxy.app import CHAT_PATHS, ProxyConfig, create_app, without_credentials

__all__ = ["ProxyConfig", "create_app", "CHAT_PATHS", "without_credentials"]
