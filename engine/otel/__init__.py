"""OpenTelemetry GenAI export: a session's model calls, compactions and audit findings as spans
(``pip install 'ctxledger[otel]'``; the mapping is documented in docs/otel.md).

    from engine.otel import export_sessions, otlp_exporter
    export_sessions([ledger.session("agent-42")], otlp_exporter("http://127.0.0.1:4318"))

Live export (the proxy, hooks and adapters call it once per recorded call or compaction):

    from engine.otel import live
    live.enable()                 # OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT, batched in the background
    live.recorded(session)        # after each recorded call; a no-op while live export is off
    live.shutdown()               # flush

``engine.otel.live`` imports without the SDK (its functions are no-ops until ``enable``); the rest
loads the SDK on first use.
"""

import importlib
from typing import Any

__all__ = [
    "export_sessions",
    "session_spans",
    "otlp_exporter",
    "traces_endpoint",
    "default_resource",
    "capture_content",
    "SessionExport",
    "ExportError",
    "Mapper",
    "live",
]

_EXPORTS = {
    "export_sessions": "engine.otel.export",
    "session_spans": "engine.otel.export",
    "otlp_exporter": "engine.otel.export",
    "traces_endpoint": "engine.otel.export",
    "default_resource": "engine.otel.export",
    "capture_content": "engine.otel.export",
    "SessionExport": "engine.otel.export",
    "ExportError": "engine.otel.export",
    "Mapper": "engine.otel.mapping",
}


def __getattr__(name: str) -> Any:
    if name == "live":
        return importlib.import_module("engine.otel.live")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.otel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
