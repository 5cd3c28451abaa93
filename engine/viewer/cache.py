"""The one thing the viewer computes over a whole log, the live-token curve, computed once per
session head and kept (a few sessions' worth) so a page never waits for it twice."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["CurveCache"]


class CurveCache:
    """``get(key, compute)``: the value for ``key`` (session id, head position), computed by one
    caller while concurrent callers for the same key wait for it; the oldest entries are dropped
    beyond ``size``."""

    def __init__(self, size: int = 8):
        self.size = size
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._locks: dict[Any, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        with self._guard:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._values:
                    return self._values[key]
            value = compute()
            with self._guard:
                self._values[key] = value
                self._locks.pop(key, None)
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return value
