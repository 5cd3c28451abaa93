"""``ctxledger``: a thin command line over the library (like git or sqlite-utils)."""

from engine.cli._app import main
from engine.cli import core  # noqa: F401  (registers: sessions, log, show, verify, export, import, mark)
from engine.cli import compaction  # noqa: F401  (registers: compact, replay)

__all__ = ["main"]
