"""Taking back what a check wrote (engine/speculative_step.py): the positions of a rejected draft
cut from KV caches, each row of a batch by its own count, and recurrent state, which cannot be
cut, restored and brought forward over the kept tokens (engine/mixer_replay.py, or the whole
model). Also which caches can do either: a lone request's plain, quantised and sliding-window
KV layers (until the window fills), a batch's plain batched KV layers, and recurrent layers by
replaying.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("mlxctl.engine")


def cut(batch: Any, kept: list[int], written: int, caches: list[Any] | None = None) -> None:
    """Each row keeps ``kept[i]`` of the ``written`` positions just filled: cut the rest from
    ``caches`` (the batch's KV layers; all its layers by default)."""
    caches = batch.caches if caches is None else caches
    most = max(kept)
    must_trim(caches, written - most)
    if not batch.batched or most == min(kept):
        return
    import mlx.core as mx
    from mlx_lm.models.cache import dynamic_roll

    short = [most - k for k in kept]
    shift = mx.array(short)
    for c in caches:
        if hasattr(c, "roll"):  # --kv-bits: quantised parts (engine/kv/quantized.py)
            c.roll(shift)
            continue
        c.keys = dynamic_roll(c.keys, shift[:, None], axis=2)
        c.values = dynamic_roll(c.values, shift[:, None], axis=2)
        c.offset = c.offset - shift
        c.left_padding = c.left_padding + shift
    batch.left = [p + s for p, s in zip(batch.left, short)]


def recurrent_states(caches: list[Any]) -> list[tuple[Any, list[Any]]]:
    """Each recurrent layer with its state arrays (the layers replace them, never change them)."""
    from mlx_lm.models.cache import ArraysCache

    return [(c, list(c.cache)) for c in caches if type(c) is ArraysCache]


def replay(engine: Any, batch: Any, saved: list[tuple[Any, list[Any]]], kept: list[list[int]], written: int) -> None:
    """A recurrent model's rows kept ``kept[i]`` (the pending token and the accepted draft) of
    the ``written`` positions just checked. Recurrent state cannot be cut: it goes back to
    before the check and is brought forward over the kept positions, by running only the
    recurrent mixers again on what the check gave them, each row as far as its own count
    (engine/mixer_replay.py), the other layers cut as a plain model's are (:func:`cut`). Where
    that cannot be done, the other layers are cut by all ``written`` and the kept tokens run
    through the whole model again (their logits are not needed): as one batch where every row
    kept as many, else by :func:`refill`. A draft accepted whole by every row needs none of it."""
    counts = {len(k) for k in kept}
    if counts == {written}:
        return
    for layer, state in saved:
        layer.cache = state
    tap, lengths = engine.mixer_tap, [len(k) for k in kept]
    if tap is not None and tap.replay(lengths, written, [layer for layer, _ in saved]):
        engine.spec_mixer_replays += 1
        cut(batch, lengths, written, [c for c in batch.caches if c.is_trimmable()])
        return
    must_trim([c for c in batch.caches if c.is_trimmable()], written)
    if len(counts) == 1:
        engine.runner.verify(batch, kept)
    else:
        refill(engine, batch, kept)


def refill(engine: Any, batch: Any, kept: list[list[int]]) -> None:
    """Rows that kept different counts run them again together through the whole model,
    right-padded to the longest: each recurrent layer is told each row's length, so its state
    (and its convolution's window) stops at the row's last kept token, and each KV layer's right
    padding is rolled to the left after, as a batched prompt tail's is (runner._tails_logits),
    so every row ends at the same column again; the batch's host mirror of the padding grows
    with it."""
    lengths = [len(k) for k in kept]
    pads = right_padded(batch.caches, lengths, max(lengths))
    engine.runner.verify(batch, [k + [0] * pad for k, pad in zip(kept, pads)])  # logits never evaluated
    for c in batch.caches:
        c.finalize()
    batch.left = [p + s for p, s in zip(batch.left, pads)]


def right_padded(caches: list[Any], lengths: list[int], width: int) -> list[int]:
    """Ready batched ``caches`` for rows of ``lengths`` real tokens right-padded to ``width``
    (recurrent layers stop at each row's length; KV layers roll their padding left at
    ``finalize``); the rows' padding."""
    from mlx_lm.models.cache import ArraysCache

    pads = [width - n for n in lengths]
    for c in caches:
        if type(c) is ArraysCache:
            c.prepare(lengths=lengths)
        else:
            c.prepare(right_padding=pads)
    return pads


def lengths_honoured(runner: Any) -> bool:
    """Whether the model's recurrent layers stop at a row's length (mlx-lm's
    ``ArraysCache.prepare(lengths=...)``, which most of its recurrent mixers read; Mamba's does
    not): the recurrent state after three tokens must be the state after five told its length
    is three. Two short passes, once at load."""
    import mlx.core as mx
    from mlx_lm.models.cache import ArraysCache

    def states(tokens: list[int], length: int | None = None) -> list[Any]:
        cache = [type(c).merge([c]) for c in runner.new_cache()]
        if length is not None:
            right_padded(cache, [length], len(tokens))
        runner.model(mx.array([tokens]), cache=cache)
        for c in cache:
            c.finalize()
        return [s for c in cache if type(c) is ArraysCache for s in c.cache if s is not None]

    try:
        short, long = states([1, 2, 3]), states([1, 2, 3, 4, 5], length=3)
        mx.eval(short, long)
        return len(short) == len(long) > 0 and all(
            a.shape == b.shape and mx.allclose(a, b, rtol=1e-2, atol=1e-3).item() for a, b in zip(short, long))
    except Exception:  # noqa: BLE001 - a model this probe cannot run speculates one request at a time
        log.debug("the recurrent length probe failed", exc_info=True)
        return False


def batched_rollbackable(caches: list[Any], replay: bool) -> bool:
    """Whether a batch's caches can drop a rejected draft: plain batched KV layers by cutting,
    and (``replay``) recurrent layers by replaying."""
    from mlx_lm.models.cache import ArraysCache

    from mlxctl.engine.batch import BATCHED_KV

    return all(type(c) in BATCHED_KV or (replay and type(c) is ArraysCache) for c in caches)


def can_roll_back(cache: list[Any], n: int, replay: bool = False) -> bool:
    """Whether ``n`` tokens written to a lone request's ``cache`` can all be cut again (a
    sliding window cuts nothing once it is full: mlx-lm trims a ``RotatingKVCache`` only while
    its offset is below its size; with ``replay``, recurrent layers go back by :func:`replay`)."""
    from mlx_lm.models.cache import ArraysCache, RotatingKVCache

    return all((c.is_trimmable() or (replay and type(c) is ArraysCache))
               and (type(c) is not RotatingKVCache or c.offset + n < c.max_size) for c in cache)


def trim(cache: list[Any], n: int) -> bool:
    """Cut the last ``n`` tokens from every layer of ``cache``; False (nothing cut) where a
    layer cannot be cut (recurrent state)."""
    if n <= 0:
        return True
    from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

    if not can_trim_prompt_cache(cache):
        return False
    trim_prompt_cache(cache, n)
    return True


def must_trim(cache: list[Any], n: int) -> None:
    """:func:`trim`, where the step already made sure the layers can be cut (``can_roll_back``):
    positions left behind would make every later token differ from plain decoding, so a layer
    that cannot be cut is a bug to surface, not to decode on from."""
    if not trim(cache, n):
        raise RuntimeError(f"speculative decoding could not cut {n} positions from a cache "
                           f"({', '.join(sorted({type(c).__name__ for c in cache}))})")
