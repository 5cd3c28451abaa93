"""``ctxledger otel export``: sessions sent to an OTLP/HTTP endpoint as spans, in one pass over
each log.

The exporter is the official ``OTLPSpanExporter`` (HTTP/protobuf), so the standard
``OTEL_EXPORTER_OTLP_*`` variables apply (endpoint, headers, timeout, compression, certificates);
``endpoint=`` overrides the endpoint alone. Spans are sent in batches of ``BATCH`` as the fold makes
them, then the audit's evaluation spans.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import msgspec
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from engine.errors import InvalidInputError, LedgerError
from engine.otel import attributes as A
from engine.otel.evaluations import evaluation_spans
from engine.otel.mapping import Mapper
from engine.otel.times import event_ns

__all__ = [
    "BATCH",
    "CONTENT_ENV",
    "ExportError",
    "SessionExport",
    "capture_content",
    "default_resource",
    "export_sessions",
    "otlp_exporter",
    "resolved_endpoint",
    "session_spans",
    "traces_endpoint",
]

BATCH = 512  # spans per OTLP request (the SDK's own default batch size)
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = {"true", "1", "yes", "on", "span_only", "span_and_event"}


class ExportError(LedgerError):
    """The OTLP endpoint did not take the spans (unreachable, refused, or an error status)."""


class SessionExport(msgspec.Struct, kw_only=True):
    """What one session's export sent."""

    session: str
    position: int
    spans: int = 0
    turns: int = 0
    calls: int = 0
    compactions: int = 0
    evaluations: int = 0


def capture_content(flag: bool | None = None) -> bool:
    """Message content is opt-in (the convention's rule): ``flag``, else ``$OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    if flag is not None:
        return flag
    return os.environ.get(CONTENT_ENV, "").strip().lower() in _CONTENT_ON


def default_resource(**attributes: Any) -> Resource:
    """``service.name=ctxledger`` and Phoenix's project ``ctxledger``, unless ``OTEL_SERVICE_NAME`` or
    ``OTEL_RESOURCE_ATTRIBUTES`` say otherwise."""
    base = {"service.name": "ctxledger", A.OI_PROJECT: "ctxledger", "telemetry.sdk.language": "python", **attributes}
    return Resource(base).merge(OTELResourceDetector().detect())


def traces_endpoint(endpoint: str) -> str:
    """A base URL (``http://host:4318``, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes) or a full traces URL
    (``.../v1/traces``) as the URL spans are posted to."""
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise InvalidInputError("the OTLP endpoint must be an http(s) URL, e.g. http://127.0.0.1:4318")
    endpoint = endpoint.strip()
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"the OTLP endpoint must be an http(s) URL, e.g. http://127.0.0.1:4318; got {endpoint!r}")
    if parts.path.rstrip("/").endswith("/v1/traces"):
        return endpoint
    return endpoint.rstrip("/") + "/v1/traces"


def resolved_endpoint(endpoint: str | None = None) -> str:
    """Where spans go: ``endpoint``, else ``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
    ``$OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else the SDK's default; shown without
    credentials."""
    if endpoint is not None:
        url = traces_endpoint(endpoint)
    elif os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        url = os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    elif os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    else:
        url = "http://localhost:4318/v1/traces"
    parts = urlsplit(url)
    if parts.hostname and "@" in parts.netloc:
        url = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")).geturl()
    return url


def otlp_exporter(endpoint: str | None = None) -> SpanExporter:
    """The official OTLP/HTTP span exporter; ``endpoint`` (a base or traces URL) overrides the
    environment's."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=traces_endpoint(endpoint) if endpoint is not None else None)


def session_spans(session: Any, *, content: bool = False, audit: bool = True, resource: Resource | None = None,
                  progress: Callable[[int], None] | None = None, stats: SessionExport | None = None) -> Iterator[ReadableSpan]:
    """The spans of one session (a ``Session`` or a ``SessionView``), in log order, then its audit's
    evaluation spans. A generator: a long log is never held as spans all at once."""
    mapper = Mapper(session.name, session.id, resource=resource or default_resource(), content=content)
    stats = stats if stats is not None else SessionExport(session=session.name, position=session.position)
    last = None
    n = 0
    for ev in session.events():
        last = ev
        for span in mapper.feed(ev):
            _count(stats, span)
            yield span
        n += 1
        if progress is not None and n % 1024 == 0:
            progress(1024)
    for span in mapper.finish():
        _count(stats, span)
        yield span
    if progress is not None and n % 1024:
        progress(n % 1024)
    stats.turns = mapper.turn_count
    if audit and last is not None:
        for span in evaluation_spans(mapper, session.audit(), event_ns(last)):
            stats.evaluations += 1
            stats.spans += 1
            yield span


def _count(stats: SessionExport, span: ReadableSpan) -> None:
    stats.spans += 1
    kind = span.attributes.get(A.OI_KIND)
    if kind == "LLM":
        stats.calls += 1
    elif A.COMPACTION_KIND in span.attributes:
        stats.compactions += 1


def _batches(spans: Iterable[ReadableSpan], size: int) -> Iterator[list[ReadableSpan]]:
    batch: list[ReadableSpan] = []
    for span in spans:
        batch.append(span)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def export_sessions(sessions: Iterable[Any], exporter: SpanExporter, *, content: bool = False, audit: bool = True,
                    resource: Resource | None = None, progress: Callable[[int], None] | None = None,
                    batch: int = BATCH) -> list[SessionExport]:
    """Send each session's spans through ``exporter``; raises ``ExportError`` when it refuses a batch
    (what was sent before stays sent: re-running the export sends the same ids again)."""
    resource = resource or default_resource()
    done = []
    for session in sessions:
        stats = SessionExport(session=session.name, position=session.position)
        for chunk in _batches(session_spans(session, content=content, audit=audit, resource=resource,
                                            progress=progress, stats=stats), batch):
            if exporter.export(chunk) is not SpanExportResult.SUCCESS:
                raise ExportError(f"the OTLP endpoint did not accept the spans of session {session.name!r} "
                                  f"(after {stats.spans - len(chunk)} sent); is it running and reachable?")
        done.append(stats)
    return done
