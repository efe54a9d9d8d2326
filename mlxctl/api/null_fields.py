"""JSON ``null`` for an optional request field means the field is absent, as OpenAI and
Anthropic read it (``"n": null``, ``"logprobs": null``, ``"store": null``, ``"stream": null``).

Bodies are validated strictly (``server/body.py``: ``"3000"`` is not a number), and a field like
``n: int = 1`` would refuse ``null`` as "not a valid integer". :class:`NullMeansAbsent` drops a
``null`` before validation when the field has a default and its type does not take ``None``, so
the default applies. Fields whose type takes ``None`` keep it (it is their default or means what
it says), required fields still refuse ``null``, and an unknown field is refused whatever its
value.
"""

from __future__ import annotations

import types
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, model_validator


def admits_none(annotation: Any) -> bool:
    """Whether a field of this type takes ``None`` as a value."""
    if annotation is Any or annotation is None or annotation is type(None):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return admits_none(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return any(admits_none(arg) for arg in get_args(annotation))
    return False


@cache
def _defaulted_non_nullable(model: type[BaseModel]) -> frozenset[str]:
    """Names (and aliases) of ``model``'s fields that have a default and do not take ``None``."""
    names = set()
    for name, field in model.model_fields.items():
        if not field.is_required() and not admits_none(field.annotation):
            names.update(n for n in (name, field.alias) if n)
    return frozenset(names)


class NullMeansAbsent(BaseModel):
    """A request body (or part of one) in which ``null`` for an optional field means absent."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        dropped = _defaulted_non_nullable(cls)
        if not any(data.get(k, 0) is None for k in dropped):
            return data
        return {k: v for k, v in data.items() if not (v is None and k in dropped)}
