"""A least-recently-used map within a byte budget (anything with ``nbytes``), thread-safe.

The vision tower's features by image key (``adapter.FeatureCache``) and decoded videos by
content and sampling (``video_cache.VideoCache``) are both this.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class ByteLRU:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: str, value: Any) -> None:
        """Keep ``value`` (a value larger than the whole budget is not kept)."""
        with self._lock:
            if key in self._items or value.nbytes > self.max_bytes:
                return
            self._items[key] = value
            self.nbytes += value.nbytes
            while self.nbytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self.nbytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._items), "bytes": self.nbytes, "max_bytes": self.max_bytes,
                    "hits": self.hits, "misses": self.misses}
