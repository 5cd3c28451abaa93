"""A local OTLP/HTTP trace receiver on 127.0.0.1 that decodes what it gets with
``opentelemetry-proto``: for tests, benchmarks and trying the export without a backend.

    with OTLPReceiver() as receiver:
        export_sessions([session], otlp_exporter(receiver.endpoint))
        spans = receiver.spans()          # decoded protobuf Span messages

It answers ``POST /v1/traces`` (gzip or plain), keeps each request's headers and decoded body, and
stops by itself after ``lifetime`` seconds if the caller never closes it. ``fail_with`` makes it
answer with an error status instead.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

__all__ = ["OTLPReceiver"]


class OTLPReceiver:
    def __init__(self, *, lifetime: float = 300.0, fail_with: int | None = None):
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.fail_with = fail_with
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/traces":
                    return self._answer(404, b"")
                if receiver.fail_with:
                    return self._answer(receiver.fail_with, b"refused by the test receiver")
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.requests.append(request)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                self._answer(200, ExportTraceServiceResponse().SerializeToString())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._closed = False

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Any]:
        """Every span received, in arrival order (``opentelemetry.proto.trace.v1.Span`` messages)."""
        with self.lock:
            return [span for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans]

    def resources(self) -> list[Any]:
        with self.lock:
            return [rs.resource for r in self.requests for rs in r.resource_spans]

    def scopes(self) -> list[Any]:
        with self.lock:
            return [ss.scope for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans]
