"""``--kv-bits``, ``--kv-group-size`` and ``--max-model-len``: what a running request's KV
costs and how long a context may be, checked before any model loads (docs/memory.md)."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import typer

from mlxctl.cli.context import given_on_command_line
from mlxctl.errors import BadInputError

KvBitsOpt = Annotated[
    int,
    typer.Option("--kv-bits", metavar="BITS",
                 help="Keep running requests' KV cache quantised to 8 or 4 bits (with a 16-bit model and groups of "
                      "64, about 1.9x or 3.6x more context or requests in the same memory; not bit-exact); 0: the "
                      "model's dtype. Cached prefix blocks are kept in the same form."),
]
KvGroupSizeOpt = Annotated[
    int,
    typer.Option("--kv-group-size", metavar="N",
                 help="With --kv-bits: values per quantisation group along the head dimension (32, 64 or 128; "
                      "smaller is closer, larger is smaller)."),
]
MemoryBudgetOpt = Annotated[
    str,
    typer.Option("--memory-budget-gb", metavar="GB",
                 help="Memory for every model's weights, prefix cache and the KV of the requests they run, shared "
                      "by all served models: a request starts only when its KV (prompt plus max_tokens) fits "
                      "beside the running ones, one that can never fit gets 400, and a burst beyond it gets 503 "
                      "with Retry-After; auto: the GPU's recommended working set (Metal) or MLX's memory limit; 0: "
                      "no budget."),
]
MaxModelLenOpt = Annotated[
    Optional[int],
    typer.Option("--max-model-len", metavar="N", min=1, show_default=False,
                 help="The longest context (prompt plus reply, in tokens) a request may use; longer ones are "
                      "refused, naming it. Default: the model's own."),
]


def kv_flags(ctx: typer.Context, bits: int, group_size: int, prefix_bits: int = 0):
    """The running requests' KV settings; a one-line error for a bad value, a group size given
    without bits, or (serve) cached prefix blocks asked to keep another bit count."""
    if not bits and given_on_command_line(ctx, "kv_group_size"):
        raise BadInputError("--kv-group-size needs --kv-bits", hint="add --kv-bits 8 or 4")
    if bits and prefix_bits and prefix_bits != bits:
        raise BadInputError(f"--prefix-cache-bits {prefix_bits} differs from --kv-bits {bits}: cached blocks keep "
                            "the running requests' KV as it is", hint="leave --prefix-cache-bits out")
    from mlxctl.engine.kv_config import KVQuant  # here: bench-serve imports the CLI, never the engine

    return KVQuant(bits, group_size)


def memory_budget(text: str) -> int | None:
    """``--memory-budget-gb`` in bytes: a number of GiB, ``auto`` (the device's own limit) or 0 (None: no budget)."""
    if text.strip().lower() == "auto":
        return device_memory()
    try:
        gb = float(text)
    except ValueError:
        gb = -1.0
    if not gb >= 0 or gb == float("inf"):
        raise BadInputError(f"--memory-budget-gb must be a number of GiB, auto or 0, got {text!r}")
    return math.ceil(gb * (1 << 30)) or None  # a positive budget never rounds down to "none"


def shared_budget(total: int | None, pin_primary: bool) -> dict:
    """The primary engine's memory settings under ``serve``: one ledger for the budget, which the
    pool's engines share (engine/memory.py); the primary's holdings are fixed while it is pinned."""
    if not total:
        return {"memory_budget_bytes": None}
    from mlxctl.engine.memory import MemoryLedger

    return {"memory_budget_bytes": total, "memory_ledger": MemoryLedger(total), "memory_pinned": pin_primary}


def device_memory() -> int:
    """The memory a server may plan with: Metal's recommended working set, else MLX's own limit."""
    import mlx.core as mx

    from mlxctl.engine.wired import WORKING_SET, backend

    if backend() == "metal":
        return int(mx.device_info()[WORKING_SET])
    return int(mx.get_memory_limit())


def engine_flags(ctx: typer.Context, speculation: tuple, kv: tuple, max_model_len: Optional[int],
                 tensor_parallel: int = 1, prefix_bits: int = 0) -> dict:
    """The engine flags `run`, `chat` and `serve` share, checked, as EngineConfig fields:
    ``speculation`` is (--speculative, --num-draft-tokens, --draft-model, --draft-dtype,
    --grow-drafts), ``kv`` is (--kv-bits, --kv-group-size)."""
    from mlxctl.cli.speculation import speculation_flags  # here: it imports the engine

    mode, num_draft_tokens, draft_model, draft_dtype, grow = speculation
    return {"speculation": speculation_flags(ctx, mode, num_draft_tokens, draft_model, draft_dtype, tensor_parallel,
                                             grow),
            "kv": kv_flags(ctx, *kv, prefix_bits), "max_model_len": max_model_len}


def engine_config(ctx: typer.Context, speculation: tuple, kv: tuple, max_model_len: Optional[int],
                  tensor_parallel: int = 1):
    """The EngineConfig of `run` and `chat` (one model, default scheduling), from engine_flags' flags."""
    from mlxctl.engine.engine import EngineConfig

    return EngineConfig(**engine_flags(ctx, speculation, kv, max_model_len, tensor_parallel))
