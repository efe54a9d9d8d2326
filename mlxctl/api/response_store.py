"""Past responses, kept for ``previous_response_id`` and GET /v1/responses/{id}: a bounded LRU."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class StoredResponse:
    """A finished response: its wire body and the conversation it ended (input + output)."""

    body: dict
    messages: tuple[dict[str, str], ...]  # chat messages, instructions excluded


class ResponseStore:
    """Holds at most ``capacity`` responses; the least recently used one is dropped first."""

    def __init__(self, capacity: int):
        if capacity < 0:
            raise ValueError("the response store capacity must be at least 0")
        self.capacity = capacity
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, response_id: str, stored: StoredResponse) -> None:
        self._items[response_id] = stored
        self._items.move_to_end(response_id)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        stored = self._items.get(response_id)
        if stored is not None:
            self._items.move_to_end(response_id)
        return stored

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None
