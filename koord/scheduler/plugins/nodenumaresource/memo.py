"""A bounded, thread-safe map of NodeNUMAResource's NUMA decisions (admissions and scores), keyed by what
they depend on, so that identical nodes and successive pods of one shape share one computation."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

MEMO_SIZE = 8192


class Memo:
    """A bounded map of decisions, the least recently used forgotten first."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
