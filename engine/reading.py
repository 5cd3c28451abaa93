"""What read-side code may ask of a session or a time-travel view, as a Protocol.

Projections, rendering and export annotate their ``reader`` argument with ``LogReader`` instead of
importing ``engine.session``: they sit below it and only read. ``engine.session.Session`` and
``SessionView`` implement it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol
from uuid import UUID

from engine.events import Event, Observed
from engine.spans import Span

__all__ = ["LogReader", "ChainPages", "VerifyOutcome"]


class ChainPages(Protocol):
    """A walk of a session's hash chain (``engine._store.chain.ChainWalk``)."""

    ok: bool
    last: int

    def pages(self) -> Iterator[list[Event]]: ...


class VerifyOutcome(Protocol):
    ok: bool
    position: int
    head: str
    first_bad_position: int | None
    reason: str


class LogReader(Protocol):
    """A session (or a view of it at one position): its live buffer and the log behind it."""

    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...

    @property
    def strict(self) -> bool: ...

    @property
    def position(self) -> int: ...

    @property
    def tokens(self) -> int: ...

    @property
    def state(self) -> Any: ...

    def spans(self) -> list[Span]: ...

    def span(self, span_id: str) -> Span: ...

    def marks(self) -> dict[str, int]: ...

    def events(self, start: int = 1, stop: int | None = None) -> Iterable[Event]: ...

    def event(self, position: int) -> Event: ...

    def observation(self, k: int) -> Observed: ...

    def original(self, span_id: str) -> Span: ...

    def originals(self, span_id: str) -> list[Span]: ...

    def chain_walk(self) -> ChainPages: ...

    def verify(self) -> VerifyOutcome: ...

    def resolve_position(self, at: int | str | None) -> int: ...

    def check_span_id(self, span_id: str) -> None: ...

    def at(self, n: int | str) -> LogReader: ...
