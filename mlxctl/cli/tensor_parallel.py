"""`--tensor-parallel N` for `serve` and `run`: the checks, and what ranks other than 0 do."""

from __future__ import annotations

from typing import Any

from mlxctl.errors import BadInputError


def check_serve_options(n: int, *, extra_models: int, cache_dir: Any) -> None:
    """What `serve` cannot do over several ranks yet, refused before anything loads."""
    if n == 1:
        return
    if extra_models:
        raise BadInputError("--tensor-parallel serves one model", hint="drop the extra -m models")
    if cache_dir is not None:
        raise BadInputError("--cache-dir does not work with --tensor-parallel yet (each rank holds a "
                            "different slice of the KV)", hint="drop --cache-dir; the in-memory prefix cache works")


def rank_group(n: int, verb: str) -> Any:
    """The process group for ``n`` ranks (None for one)."""
    from mlxctl.distributed.group import tensor_group

    return tensor_group(n, verb)


def follow(engine: Any) -> None:
    """A rank other than 0: load this rank's share of the model, then step with rank 0 until it
    stops (its clients never see this process)."""
    engine.start()
    engine.wait()
