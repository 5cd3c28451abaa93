"""Live export: the spans of each recorded call and compaction, sent as they happen.

A recording process (the proxy, a hook, an adapter) calls ``recorded(session)`` once after each call
or compaction it wrote. The exporter reads the session's events since the last call, folds them with
the same mapping as ``ctxledger otel export`` (so a session exported live and again later has the
same ids) and hands finished spans to a ``BatchSpanProcessor``: the OTLP requests go out on the
SDK's background thread, never on the caller's.

The first time a process sees a session it starts at the turn the newest event belongs to (the
events after the last model call before it), so a restarted proxy does not resend history. A turn's
root span goes out when the turn ends (the model call's reply is recorded); compaction spans go out
at once. A turn still open when the process stops is left to ``ctxledger otel export``, which sends
it with the same ids.

This module imports without the OpenTelemetry SDK: until ``enable()`` every function is a no-op.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LiveExporter", "enable", "enabled", "recorded", "shutdown", "MAX_SCAN", "SESSIONS_KEPT"]

log = logging.getLogger("ctxledger.otel")
MAX_SCAN = 10_000  # events read back, at most, to find where a session's current turn started
SESSIONS_KEPT = 1024  # sessions whose fold is kept between calls (an evicted one starts over at its turn)

_live: LiveExporter | None = None
_lock = threading.Lock()


class _State:
    __slots__ = ("mapper", "cursor")

    def __init__(self, mapper: Any, cursor: int):
        self.mapper = mapper
        self.cursor = cursor  # the next position to read


class LiveExporter:
    """Folds recorded sessions into spans and hands them to ``processor`` (a ``SpanProcessor``,
    normally a ``BatchSpanProcessor`` over the OTLP exporter)."""

    def __init__(self, processor: Any, *, content: bool = False, resource: Any = None):
        from engine.otel.export import default_resource

        self.processor = processor
        self.content = content
        self.resource = resource or default_resource()
        self._states: OrderedDict[Any, _State] = OrderedDict()
        self._lock = threading.Lock()
        self.spans = 0
        self.failures = 0

    def recorded(self, session: Any) -> int:
        """Export what ``session`` recorded since the last call; returns the number of spans handed
        on. Never raises: a failure is logged and counted, and the session starts over next time."""
        try:
            with self._lock:
                return self._recorded(session)
        except Exception:
            self.failures += 1
            self._states.pop(getattr(session, "id", None), None)
            log.warning("ctxledger otel: live export of session %r failed", getattr(session, "name", "?"), exc_info=True)
            return 0

    def _recorded(self, session: Any) -> int:
        head = session.position
        state = self._states.get(session.id)
        if state is None:
            state = self._states[session.id] = self._start(session, head)
            while len(self._states) > SESSIONS_KEPT:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(session.id)
        if head < state.cursor:
            return 0
        n = 0
        on_end = self.processor.on_end
        feed = state.mapper.feed
        for ev in session.events(state.cursor, head):
            for span in feed(ev):
                on_end(span)
                n += 1
        state.cursor = head + 1
        self.spans += n
        return n

    def _start(self, session: Any, head: int) -> _State:
        from engine.otel.mapping import Fold, Mapper, ends_turn

        start = 1
        following = session.event(head) if head >= 1 else None
        for q in range(head - 1, max(0, head - MAX_SCAN), -1):
            ev = session.event(q)
            if ends_turn(ev, following):
                start = q + 1
                break
            following = ev
        else:
            start = max(1, head - MAX_SCAN + 1)
        fold = Fold.from_spans(session.at(start - 1).spans(), session.event) if start > 1 else Fold(session.event)
        mapper = Mapper(session.name, session.id, resource=self.resource, content=self.content, fold=fold, index=False)
        return _State(mapper, start)

    def forget(self, session: Any) -> None:
        with self._lock:
            self._states.pop(getattr(session, "id", session), None)

    def flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.processor.force_flush(timeout_millis))

    def shutdown(self) -> None:
        with self._lock:
            self._states.clear()
        self.processor.shutdown()


def enable(endpoint: str | None = None, *, content: bool | None = None, exporter: Any = None,
           processor: Any = None) -> LiveExporter:
    """Start live export (OTLP/HTTP to ``endpoint``, else the ``OTEL_EXPORTER_OTLP_*`` environment),
    batched in the background; flushed at exit. Raises ``ImportError`` naming the extra when the SDK
    is missing. ``exporter``/``processor`` replace the OTLP exporter or the batch processor (tests)."""
    global _live
    try:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from engine.otel.export import capture_content, otlp_exporter
    except ImportError as e:  # pragma: no cover - exercised where the extra is missing
        raise ImportError(f"OpenTelemetry export needs the otel extra: pip install 'ctxledger[otel]' ({e})") from None
    if processor is None:
        processor = BatchSpanProcessor(exporter if exporter is not None else otlp_exporter(endpoint))
    live = LiveExporter(processor, content=capture_content(content))
    with _lock:
        previous, _live = _live, live
    if previous is not None:
        previous.shutdown()
    return live


def enabled() -> bool:
    return _live is not None


def recorded(session: Any) -> None:
    """Called once after each recorded call or compaction; a no-op while live export is off."""
    live = _live
    if live is not None and session is not None:
        live.recorded(session)


def shutdown() -> None:
    """Flush what is queued and stop live export."""
    global _live
    with _lock:
        live, _live = _live, None
    if live is not None:
        live.shutdown()


atexit.register(shutdown)
