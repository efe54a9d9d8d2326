"""engine/mixer_replay.py: undoing a rejected draft on a recurrent model by running its
recurrent mixers alone over the kept positions leaves every cache as running those positions
through the whole model would."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ArraysCache, make_prompt_cache

from mlxctl.engine.mixer_replay import MixerTap
from mlxctl.engine.speculative_step import trim
from mlxctl.models.dummy import build_model
from tests.engine.hybrid_configs import CONFIGS

PROMPT, CHECKED, KEPT = [3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 13], 3


def states(cache: list) -> list:
    out = []
    for c in cache:
        arrays = list(c.cache) if type(c) is ArraysCache else [c.keys[..., :c.offset, :], c.values[..., :c.offset, :]]
        out += arrays
    return out


@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5", "mamba", "nemotron_h", "lfm2", "granitemoehybrid"])
def test_the_mixers_alone_bring_the_state_where_the_kept_tokens_would(arch):
    model = build_model(CONFIGS[arch])
    tap = MixerTap(model)
    assert tap.usable
    cache = make_prompt_cache(model)
    model(mx.array([PROMPT]), cache=cache)
    mx.eval(states(cache))
    saved = [(c, list(c.cache)) for c in cache if type(c) is ArraysCache]
    with tap.recording():
        mx.eval(model(mx.array([CHECKED]), cache=cache))
    assert tap.calls  # one call per recurrent layer
    for c, state in saved:
        c.cache = state
    assert tap.replay(KEPT, len(CHECKED))
    trim([c for c in cache if c.is_trimmable()], len(CHECKED) - KEPT)

    want = make_prompt_cache(model)
    model(mx.array([PROMPT + CHECKED[:KEPT]]), cache=want)
    got, ref = states(cache), states(want)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert a.shape == b.shape and mx.allclose(a, b, atol=1e-4).item()


def test_a_model_without_recurrent_layers_has_no_mixers():
    from tests.engine.tiny import tiny_llama

    assert not MixerTap(tiny_llama()).usable


def test_a_recorded_call_that_cannot_be_cut_is_refused_untouched():
    model = build_model(CONFIGS["qwen3_next"])
    tap = MixerTap(model)
    cache = make_prompt_cache(model)
    with tap.recording():
        model(mx.array([CHECKED]), cache=cache)
    module, args, kwargs = tap.calls[0]
    mask = mx.ones((1, len(CHECKED)), dtype=mx.bool_)  # a mask over the positions: not cut here
    tap.calls[0] = (module, (args[0], mask, *args[2:]), kwargs)
    before = [list(c.cache) for c in cache if type(c) is ArraysCache]
    assert not tap.replay(KEPT, len(CHECKED))
    assert all(all(a is b for a, b in zip(c.cache, s)) for c, s in
               zip([c for c in cache if type(c) is ArraysCache], before))
    tap.calls = [(module, args, kwargs)]
    assert not tap.replay(KEPT, len(CHECKED) + 1)  # an input of another length than was written
    tap.calls = [(module, (), {"inputs": args[0], "cache": args[2]})]
    assert not tap.replay(KEPT, len(CHECKED))  # the input passed by name: not found, not guessed
