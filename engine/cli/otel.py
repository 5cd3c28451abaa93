"""``ctxledger otel export``: sessions as OpenTelemetry GenAI spans, over OTLP/HTTP."""

from __future__ import annotations

import logging
import os
import sys

import click

from engine.cli._app import EXIT_STORE, EXIT_USAGE, emit_json, handle_errors, main, open_ledger, progress, to_builtins

__all__ = ["otel_group", "start_live_export"]


def _sdk():
    """The export module, or a one-line error naming the extra (exit 2)."""
    try:
        from engine.otel import export
    except ImportError:
        click.echo("ctxledger: error: OpenTelemetry export needs the otel extra: pip install 'ctxledger[otel]'", err=True)
        sys.exit(EXIT_USAGE)
    return export


def start_live_export(flag: bool | None) -> bool:
    """``--otel``/``--no-otel`` of a long-running command (the proxy): start live export when asked,
    or when the standard OTLP endpoint variable is set. Asked without the extra: exit 2; implied by
    the environment without it: a warning, and the command runs without export."""
    implied = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if flag is False or (flag is None and not implied):
        return False
    try:
        from engine.otel import live
        from engine.otel.export import resolved_endpoint

        live.enable()
    except ImportError:
        if flag:
            click.echo("ctxledger: error: OpenTelemetry export needs the otel extra: pip install 'ctxledger[otel]'", err=True)
            sys.exit(EXIT_USAGE)
        click.echo("ctxledger: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set but the otel extra is not installed "
                   "(pip install 'ctxledger[otel]'): no live export", err=True)
        return False
    click.echo(f"ctxledger: live OpenTelemetry export to {resolved_endpoint()}", err=True)
    return True


@main.group("otel")
def otel_group() -> None:
    """Send sessions to OpenTelemetry backends (Phoenix, Langfuse, LangSmith, Datadog...).

    Model calls become GenAI inference spans, every compaction its own span with its sources,
    generation, tokens and refusal, prunes/restores/expansions span events, audit findings
    evaluation results. The mapping is in docs/otel.md. Live export: `ctxledger proxy --otel`.

    \b
    Example:
      ctxledger otel export agent-42 --endpoint http://127.0.0.1:6006
    """


@otel_group.command("export")
@click.argument("sessions", nargs=-1, required=True, metavar="SESSION...")
@click.option("--endpoint", default=None, metavar="URL",
              help="OTLP/HTTP endpoint: a base URL (…:4318, Phoenix: …:6006) or the full …/v1/traces URL "
                   "(default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318).")
@click.option("--content/--no-content", default=None,
              help="Include message and summary text (opt-in, as the convention says; default: "
                   "$OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, else off).")
@click.option("--no-audit", is_flag=True, help="Skip the audit: no evaluation results (faster on long logs).")
@click.option("--json", "as_json", is_flag=True, help="Print what was sent as JSON.")
@click.pass_context
@handle_errors
def export_cmd(ctx: click.Context, sessions: tuple[str, ...], endpoint: str | None, content: bool | None,
               no_audit: bool, as_json: bool) -> None:
    """Export SESSIONs as spans to an OTLP/HTTP endpoint.

    Trace and span ids are derived from the session and log position: exporting again sends the
    same ids (a backend that de-duplicates keeps one copy). The standard OTEL_EXPORTER_OTLP_*
    variables apply (headers, timeout, compression, certificates); OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES set the resource (default service.name and Phoenix project: ctxledger).
    Exit 3 when the endpoint does not take the spans.

    \b
    Example:
      ctxledger otel export agent-42 --endpoint http://127.0.0.1:6006
      OTEL_EXPORTER_OTLP_ENDPOINT=https://otlp.example.com OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer $KEY" \\
        ctxledger --db sqlite:///agent.db otel export agent-42 agent-43 --json
    """
    export = _sdk()
    exporter = export.otlp_exporter(endpoint)  # a bad URL is refused before the store is opened
    capture = export.capture_content(content)
    said = _ExporterLog()  # the exporter logs why a request failed: kept for the one-line error
    with said, open_ledger(ctx) as ledger:
        chosen = [ledger.session(name) for name in dict.fromkeys(sessions)]  # every name checked first
        total = sum(s.position for s in chosen)
        try:
            with progress("exporting", total) as advance:
                done = export.export_sessions(chosen, exporter, content=capture, audit=not no_audit, progress=advance)
        except export.ExportError as e:
            why = f" (the exporter said: {said.last})" if said.last else ""
            click.echo(f"ctxledger: error: {e.message}{why}", err=True)
            sys.exit(EXIT_STORE)
        finally:
            exporter.shutdown()
    if as_json:
        emit_json({"endpoint": export.resolved_endpoint(endpoint), "content": capture,
                   "sessions": to_builtins(done)})
        return
    for s in done:
        click.echo(f"{s.session}: {_n(s.spans, 'span')} ({_n(s.calls, 'model call')}, {_n(s.compactions, 'compaction')}, "
                   f"{_n(s.evaluations, 'evaluation')}) from {_n(s.position, 'event')} in {_n(s.turns, 'turn')}")


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


class _ExporterLog(logging.Handler):
    """While exporting: the OTLP exporter's log lines are kept (the last one explains a failure)
    instead of printed beside ctxledger's own one-line error."""

    NAMES = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.exporter.otlp.proto.http.trace_exporter",
             "opentelemetry.exporter.http_transport")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""
        self._saved: list[tuple[logging.Logger, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.last = " ".join(record.getMessage().split())[:300]

    def __enter__(self) -> _ExporterLog:
        for name in self.NAMES:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate))
            logger.addHandler(self)
            logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        for logger, propagate in self._saved:
            logger.removeHandler(self)
            logger.propagate = propagate
