"""The distributed process group behind ``--tensor-parallel N``."""

from __future__ import annotations

import os
from typing import Any

from mlxctl.errors import BadInputError

LAUNCH_HINT = "start one process per rank with mlx.launch, e.g. `mlx.launch -n {n} -- mlxctl {verb} --tensor-parallel {n} ...`"


def tensor_group(n: int, verb: str = "serve") -> Any:
    """The MLX group of this job's ``n`` ranks, or None for ``n == 1`` (no sharding).

    Refuses, with the launch recipe, a process that is not one of exactly ``n`` ranks: a
    plain ``mlxctl serve --tensor-parallel 2`` started without ``mlx.launch`` is a group of
    one and would otherwise wait forever for a peer."""
    if n < 1:
        raise BadInputError(f"--tensor-parallel must be at least 1, got {n}")
    if n == 1:
        return None
    import mlx.core as mx

    hint = LAUNCH_HINT.format(n=n, verb=verb)
    if not mx.distributed.is_available():
        raise BadInputError("--tensor-parallel needs MLX's distributed backend, which this MLX build lacks",
                            hint=hint)
    group = mx.distributed.init(strict=False)
    if group.size() != n:
        where = "a process of its own" if group.size() == 1 else f"one of {group.size()} ranks"
        raise BadInputError(f"--tensor-parallel {n} needs {n} ranks, but this is {where}", hint=hint)
    return group


def rank_of(group: Any) -> int:
    return 0 if group is None else group.rank()


def launched_rank() -> int:
    """This process's rank as the launcher set it (0 outside a launch), without importing MLX:
    the CLI uses it to keep every rank but 0 quiet before the group exists."""
    for key in ("MLX_RANK", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0
