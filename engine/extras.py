"""The optional extras (pyproject's ``[project.optional-dependencies]``): which one brings a module,
and the one error a missing one gives — ``WHAT needs the EXTRA extra: pip install 'ctxledger[EXTRA]'``
(the CLI prints it on one line and exits 2: the install needs fixing, not the input or the store).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from engine.errors import InvalidInputError

__all__ = ["MissingExtraError", "EXTRA_OF_MODULE", "extra_for", "require"]

# top-level module -> the extra that installs it (where two extras do, the smaller one)
EXTRA_OF_MODULE: dict[str, str] = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "cryptography": "crypto",
    "openai": "openai",
    "anthropic": "anthropic",
    "mcp": "mcp",
    "agents": "openai-agents",
    "langchain": "langchain",
    "langchain_core": "langchain",
    "langgraph": "langchain",
    "watchfiles": "watch",
    "starlette": "serve",
    "uvicorn": "serve",
    "httptools": "serve",
    "httpx": "proxy",
    "uvloop": "proxy",
    "opentelemetry": "otel",
    "onnxruntime": "nli",
    "numpy": "nli",
    "tokenizers": "nli",
    "bpe_openai": "fast",
}


class MissingExtraError(InvalidInputError):
    """``what`` needs an extra that is not installed; ``extra`` names it, ``missing`` the module."""

    def __init__(self, what: str, extra: str, missing: str | None = None):
        detail = f" ({missing} is missing)" if missing else ""
        super().__init__(f"{what} needs the {extra} extra: pip install 'ctxledger[{extra}]'{detail}")
        self.what, self.extra, self.missing = what, extra, missing


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name is looked up by its top level), or None."""
    if not module:
        return None
    return EXTRA_OF_MODULE.get(module.split(".", 1)[0])


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise ``MissingExtraError`` naming ``extra`` (and the module missing)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise MissingExtraError(what, extra, e.name or module) from None
