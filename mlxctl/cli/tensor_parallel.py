"""`--tensor-parallel N` for `serve` and `run`: the checks, and what ranks other than 0 do."""

from __future__ import annotations

from typing import Any

from mlxctl.errors import BadInputError


def check_run_options(n: int, *, images: Any, videos: Any) -> None:
    if n > 1 and (images or videos):
        raise BadInputError(f"{'--image' if images else '--video'} does not work with --tensor-parallel yet")


def check_serve_options(n: int, *, extra_models: int, cache_dir: Any, prefill_step_ms: int | None = None,
                        pin_primary: bool = True, allow_unconfigured: bool = False) -> None:
    """What `serve` cannot do over several ranks yet, refused before anything loads."""
    if n == 1:
        return
    if not pin_primary:
        raise BadInputError("--no-pin-primary does not work with --tensor-parallel (every rank would have to "
                            "unload and load together)", hint="drop --no-pin-primary")
    if prefill_step_ms:
        raise BadInputError("--prefill-step-ms does not work with --tensor-parallel (each rank's clock would "
                            "size its steps differently)", hint="drop --prefill-step-ms; the ranks plan by "
                            "--prefill-chunk")
    if extra_models:
        raise BadInputError("--tensor-parallel serves one model", hint="drop the extra -m models")
    if cache_dir is not None:
        raise BadInputError("--cache-dir does not work with --tensor-parallel yet (each rank holds a "
                            "different slice of the KV)", hint="drop --cache-dir; the in-memory prefix cache works")
    if allow_unconfigured:
        raise BadInputError("--tensor-parallel serves one model", hint="drop --allow-unconfigured-models")


def rank_group(n: int, verb: str) -> Any:
    """The process group for ``n`` ranks (None for one)."""
    from mlxctl.distributed.group import tensor_group

    return tensor_group(n, verb)


FOLLOWER_GRACE_S = 60.0  # after a signal: how long a follower waits for rank 0 to stop it


def follow(engine: Any) -> None:
    """A rank other than 0: load this rank's share of the model, then step with rank 0 until it
    stops (its clients never see this process)."""
    leave_signals_to_rank_0(FOLLOWER_GRACE_S, lambda: engine.model is None or engine.doorbell.peer_closed())
    engine.start()
    engine.wait()


def leave_signals_to_rank_0(grace_s: float, rank0_gone: Any = lambda: False) -> None:
    """A signal meant for the whole job (Ctrl-C in the mlx.launch terminal, a kill of its
    process group) reaches every rank. Rank 0 drains its requests and then stops the others
    through the engine; a follower that quit by itself would leave rank 0 waiting in a
    collective. So a follower waits for rank 0's stop; if none comes within ``grace_s``
    (rank 0 is gone) it exits, and a second signal makes it exit at once. So does the first
    when ``rank0_gone()`` says no stop can come: the model is still loading, or rank 0's end of
    the doorbell is closed (mlx.launch signals the others when one rank exits)."""
    import os
    import signal
    import threading

    signals = []

    def on_signal(signum: int, _frame: Any) -> None:
        signals.append(signum)
        if len(signals) > 1 or rank0_gone():
            os._exit(128 + signum)
        timer = threading.Timer(grace_s, os._exit, args=(128 + signum,))
        timer.daemon = True
        timer.start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
