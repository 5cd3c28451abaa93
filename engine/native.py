"""ctxledger's one C extension, ``engine._wordcount`` (the token counter's word-cache lookup), in one place.

``pip install`` builds it where a C compiler is available; without it the same counts come from
Python. Setting ``CTXLEDGER_NO_NATIVE=1`` forces that Python fallback even where it is built (read
once, when this module is first imported), so a test run can check the fallback on any machine.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["NO_NATIVE_ENV", "WordTable", "unavailable_reason"]

NO_NATIVE_ENV = "CTXLEDGER_NO_NATIVE"


def _switched_off() -> bool:
    return os.environ.get(NO_NATIVE_ENV, "").strip() not in ("", "0")


def _load() -> tuple[Any, str]:
    if _switched_off():
        return None, f"{NO_NATIVE_ENV} is set, which switches the C extension engine._wordcount off"
    try:
        # Imported by name: the import-linter contracts cannot see a compiled module and would take a
        # plain import of it for an import of the whole ``engine`` package.
        module = importlib.import_module("engine._wordcount")
    except ImportError:  # pragma: no cover - depends on the build
        return None, (
            "the C extension engine._wordcount is not built; it is built when ctxledger is installed on "
            "a machine with a C compiler (reinstall it there: pip install -e .)"
        )
    return module.WordTable, ""


# The C word table class, or None; ``unavailable_reason`` says why it is None.
WordTable, unavailable_reason = _load()
