"""engine/mixer_replay.py: undoing a rejected draft on a recurrent model by running its
recurrent mixers alone over the kept positions leaves every cache as running those positions
through the whole model would."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ArraysCache, make_prompt_cache

from mlxctl.engine.mixer_replay import MixerTap
from mlxctl.engine.speculative_undo import trim
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
    assert tap.replay([KEPT], len(CHECKED), [c for c, _ in saved])
    trim([c for c in cache if c.is_trimmable()], len(CHECKED) - KEPT)

    want = make_prompt_cache(model)
    model(mx.array([PROMPT + CHECKED[:KEPT]]), cache=want)
    got, ref = states(cache), states(want)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert a.shape == b.shape and mx.allclose(a, b, atol=1e-4).item()


@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5", "lfm2", "mamba2"])
def test_rows_that_kept_different_counts_each_stop_at_their_own(arch):
    """A batch of two rows keeps 2 and 4 of the 5 checked positions: the mixers run over 4, each
    row told its length, and each row's recurrent state is the one its own kept tokens give."""
    model = build_model(CONFIGS[arch])
    tap = MixerTap(model)
    prompts, checked, kept = [PROMPT, [8, 1, 6, 2, 7, 5]], [CHECKED, [14, 15, 16, 17, 18]], [2, 4]
    cache = make_prompt_cache(model)
    model(mx.array(prompts), cache=cache)
    mx.eval(states(cache))
    saved = [(c, list(c.cache)) for c in cache if type(c) is ArraysCache]
    with tap.recording():
        mx.eval(model(mx.array(checked), cache=cache))
    for c, state in saved:
        c.cache = state
    assert tap.replay(kept, len(CHECKED), [c for c, _ in saved])
    assert all(c.lengths is None for c, _ in saved)  # told for the replay only
    for row in range(2):
        want = make_prompt_cache(model)
        model(mx.array([prompts[row] + checked[row][:kept[row]]]), cache=want)
        got = [s[row:row + 1] for c, _ in saved for s in c.cache if s is not None]
        ref = [s for c in want if type(c) is ArraysCache for s in c.cache if s is not None]
        assert len(got) == len(ref) > 0
        for a, b in zip(got, ref):
            assert a.shape == b.shape and mx.allclose(a, b, atol=1e-4).item(), (arch, row)


def test_a_mixer_whose_call_takes_no_mask_is_not_cut_for_rows_of_different_lengths():
    from mlxctl.engine.mixer_replay import _with_mask

    class NoMask:
        def __call__(self, x, cache=None):
            return x

    class Positional:
        def __call__(self, x, mask, cache=None):
            return x

    assert _with_mask(NoMask(), ("x",), {}, "m") is None
    assert _with_mask(Positional(), ("x", None, "c"), {}, "m") == ("x", "m", "c")
    kwargs: dict = {}
    assert _with_mask(Positional(), ("x",), kwargs, "m") == ("x",) and kwargs == {"mask": "m"}


def test_a_model_without_recurrent_layers_has_no_mixers():
    from tests.engine.tiny import tiny_llama

    assert not MixerTap(tiny_llama()).usable


def test_a_recorded_call_that_cannot_be_cut_is_refused_untouched():
    model = build_model(CONFIGS["qwen3_next"])
    tap = MixerTap(model)
    cache = make_prompt_cache(model)
    recurrent = [c for c in cache if type(c) is ArraysCache]

    def record() -> list:
        with tap.recording():
            model(mx.array([CHECKED]), cache=cache)
        return list(tap.calls)

    calls = record()
    module, args, kwargs = calls[0]
    before = [list(c.cache) for c in recurrent]
    mask = mx.ones((1, len(CHECKED)), dtype=mx.bool_)  # a mask over the positions: not cut here
    for bad, written, restored in (
            ([(module, (args[0], mask, *args[2:]), kwargs), *calls[1:]], len(CHECKED), recurrent),
            (calls, len(CHECKED) + 1, recurrent),  # an input of another length than was written
            ([(module, (), {"inputs": args[0], "cache": args[2]}), *calls[1:]], len(CHECKED), recurrent),  # by name
            (calls[1:], len(CHECKED), recurrent),  # a restored cache no recorded call brings forward
            (calls, len(CHECKED), recurrent[1:])):  # a recorded call on a cache that was not restored
        tap.calls = bad
        assert not tap.replay([KEPT], written, restored)
        assert tap.calls == []  # the record goes either way
    assert all(all(a is b for a, b in zip(c.cache, s)) for c, s in zip(recurrent, before))  # nothing ran


def test_only_calls_given_a_recurrent_cache_are_recorded_and_a_failed_pass_leaves_none():
    model = build_model(CONFIGS["qwen3_next"])
    tap = MixerTap(model)
    layer = next(layer for layer in model.layers if getattr(layer, "is_linear", False))
    with tap.recording():
        layer.linear_attn(mx.zeros((1, 2, 64)), None, None)  # no cache: not a step of the state
    assert tap.calls == []
    with pytest.raises(RuntimeError), tap.recording():
        model(mx.array([CHECKED]), cache=make_prompt_cache(model))
        raise RuntimeError("the pass failed")
    assert tap.calls == []
