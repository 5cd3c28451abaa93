"""``ctxledger``: a thin command line over the library (like git or sqlite-utils)."""

from engine.cli._app import main
from engine.cli import core  # noqa: F401  (registers: sessions, log, show, verify, export, import, mark)
from engine.cli import compaction  # noqa: F401  (registers: compact, replay)
from engine.cli import ops  # noqa: F401  (registers: fleet, keygen, checkpoint, verify-checkpoint)
from engine.cli import forensics  # noqa: F401  (registers: audit, blame, lineage, diff, timeline)

__all__ = ["main"]
from engine.cli import demo  # noqa: F401  (registers: demo, report)
from engine.cli import serve  # noqa: F401  (registers: serve)
from engine.cli import proxy  # noqa: F401  (registers: proxy)
from engine.cli import transcripts  # noqa: F401  (registers: watch)
from engine.cli import mcp  # noqa: F401  (registers: mcp)
from engine.cli import hooks  # noqa: F401  (registers: hooks install, uninstall, status, run, plugin)
from engine.cli import lost  # noqa: F401  (registers: lost)
from engine.cli import otel  # noqa: F401  (registers: otel export)
