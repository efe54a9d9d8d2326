import pytest

from mlxctl.api.response_store import ResponseStore, StoredResponse


def _stored(n: int) -> StoredResponse:
    return StoredResponse({"id": f"resp_{n}"}, ({"role": "user", "content": str(n)},))


def test_the_least_recently_used_response_is_dropped_first():
    store = ResponseStore(2)
    store.put("a", _stored(1))
    store.put("b", _stored(2))
    assert store.get("a") is not None  # "b" is now the least recently used
    store.put("c", _stored(3))
    assert store.get("b") is None
    assert len(store) == 2 and store.get("a") and store.get("c")


def test_delete_and_zero_capacity():
    store = ResponseStore(1)
    store.put("a", _stored(1))
    assert store.delete("a") and not store.delete("a")
    empty = ResponseStore(0)
    empty.put("a", _stored(1))
    assert empty.get("a") is None
    with pytest.raises(ValueError):
        ResponseStore(-1)
