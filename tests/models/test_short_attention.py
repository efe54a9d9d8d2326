"""models/short_attention.py: the unfused attention that short multi-token passes take on CUDA
computes what MLX's fused call does, for every mask form the models hand it; where it is used."""

from __future__ import annotations

import os

import mlx.core as mx
import pytest

from mlxctl import mlx_env
from mlxctl.models import short_attention
from mlxctl.models.short_attention import unfused_attention, wants_unfused


@pytest.fixture(autouse=True)
def _environment_kept(monkeypatch):
    """install() sets MLX's thrashing check and reads MLXCTL_ATTENTION_BUCKETS: both, and the
    module's switch, go back to what they were after each test."""
    for name in (mlx_env.THRASHING_CHECK, short_attention.BUCKETS_ENV):
        monkeypatch.setenv(name, "")  # recorded (set or not) for the undo,
        monkeypatch.delenv(name)  # then unset for the test
    monkeypatch.setattr(short_attention, "_BUCKETS", False)


def qkv(queries: int, keys: int, heads: int = 8, kv_heads: int = 2, dim: int = 32, batch: int = 2):
    mx.random.seed(queries * 100 + keys)
    return (mx.random.normal((batch, heads, queries, dim)), mx.random.normal((batch, kv_heads, keys, dim)),
            mx.random.normal((batch, kv_heads, keys, dim)))


@pytest.mark.parametrize("queries,keys", [(1, 7), (9, 9), (9, 40), (17, 300)])
def test_causal_and_no_mask_match_the_fused_call(queries, keys):
    q, k, v = qkv(queries, keys)
    for mask in ("causal", None):
        want = short_attention._FUSED(q, k, v, scale=0.125, mask=mask)
        assert mx.allclose(unfused_attention(q, k, v, 0.125, mask), want, atol=1e-5).item()


def test_boolean_and_additive_array_masks_per_row_and_per_head_match_the_fused_call():
    q, k, v = qkv(9, 40, heads=6, kv_heads=3)
    left = mx.arange(40)[None, None, None, :] >= mx.array([0, 5])[:, None, None, None]  # left padding per row
    causal = mx.arange(31, 40)[:, None] >= mx.arange(40)[None]
    per_row = left & causal  # (2, 1, 9, 40)
    per_head = mx.broadcast_to(per_row, (2, 6, 9, 40)) & (mx.arange(6) != 2)[None, :, None, None] | \
        (mx.arange(40) == 0)[None, None, None, :]
    additive = mx.where(per_row, 0.0, -1e9)
    for mask in (per_row, per_head, additive, causal):
        want = short_attention._FUSED(q, k, v, scale=0.2, mask=mask)
        assert mx.allclose(unfused_attention(q, k, v, 0.2, mask), want, atol=1e-5).item()


def test_a_query_that_may_see_no_key_stays_finite_as_in_the_fused_call():
    """A batched prefill of prompts of different lengths: the shorter prompt's left-padding
    positions see no key at all. Their output must stay finite (as the fused call's does): it
    becomes the next layer's keys and values, where a NaN spreads to every row."""
    q, k, v = qkv(9, 9)
    pad = mx.array([0, 4])  # the second prompt is 4 tokens shorter
    mask = (mx.arange(9)[:, None] >= mx.arange(9)[None]) & (mx.arange(9)[None, None, None, :] >= pad[:, None, None, None])
    got, want = unfused_attention(q, k, v, 0.2, mask), short_attention._FUSED(q, k, v, scale=0.2, mask=mask)
    assert not mx.isnan(got).any().item() and not mx.isnan(want).any().item()
    assert mx.allclose(got[1, :, 4:], want[1, :, 4:], atol=1e-5).item()  # the real positions
    assert mx.allclose(got[0], want[0], atol=1e-5).item()


def test_only_short_multi_query_passes_without_sinks_take_it_and_only_on_cuda():
    assert [wants_unfused(n, None) for n in (1, 2, 9, 32, 33, 512)] == [False, True, True, True, False, False]
    assert not wants_unfused(9, mx.zeros((8,)))  # attention sinks (gpt-oss): the fused call
    assert wants_unfused(9, None, short_attention.MAX_SCORES)
    assert not wants_unfused(9, None, short_attention.MAX_SCORES + 1)  # a very long context: fused
    before = mx.fast.scaled_dot_product_attention
    assert not short_attention.install("cpu") and not short_attention.install("metal")
    assert mx.fast.scaled_dot_product_attention is before


def test_installed_on_cuda_the_call_routes_short_passes_and_keeps_the_rest(monkeypatch):
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", short_attention._FUSED)
    seen = []
    monkeypatch.setattr(short_attention, "unfused_attention",
                        lambda *a: seen.append(a[0].shape[2]) or short_attention._FUSED(*a[:3], scale=a[3], mask=a[4]))
    assert short_attention.install("cuda")
    for queries in (1, 9, 64):
        q, k, v = qkv(queries, 80)
        mx.fast.scaled_dot_product_attention(q, k, v, scale=0.1, mask="causal" if queries > 1 else None)
    assert seen == [9]


def test_the_engine_decodes_the_same_greedy_tokens_with_it_speculating_or_not(monkeypatch):
    """As on CUDA (installed here on the CPU): short prompts and verify passes go through the
    unfused attention; greedy output equals MLX's fused path's, with and without speculation."""
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.speculative import SpeculationConfig
    from tests.engine.tiny import tiny_loaded

    prompt, params = [3, 4, 5, 6, 7] * 5, SamplingParams(temperature=0, max_tokens=40)
    ngram = EngineConfig(speculation=SpeculationConfig(mode="ngram", num_draft_tokens=6, max_rows=8, measured=False))

    def run(config: EngineConfig):
        with Engine(lambda: tiny_loaded(), config) as engine:
            return engine.submit(prompt, params).collect()

    fused = run(EngineConfig()).token_ids
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", short_attention._FUSED)
    calls = []
    real = short_attention.unfused_attention
    monkeypatch.setattr(short_attention, "unfused_attention", lambda *a: calls.append(a[0].shape[2]) or real(*a))
    assert short_attention.install("cuda")
    plain, spec = run(EngineConfig()), run(ngram)
    assert plain.token_ids == fused and spec.token_ids == fused
    assert spec.timings.accepted_tokens > 0 and 25 in calls and 7 in calls  # the prompt, and 1 + 6-token drafts


def test_a_batched_prefill_of_prompts_of_different_lengths_decodes_as_with_the_fused_call(monkeypatch):
    """Left padding: the shorter prompt's padding positions see no key (see the finite test)."""
    from mlxctl.engine.engine import Engine
    from mlxctl.engine.sampling import SamplingParams
    from tests.engine.tiny import tiny_loaded

    prompts, params = [[3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [5, 9, 2, 7]], SamplingParams(temperature=0, max_tokens=12)

    def together():
        with Engine(lambda: tiny_loaded()) as engine:
            return [s.collect().token_ids for s in [engine.submit(p, params) for p in prompts]]

    fused = together()
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", short_attention._FUSED)
    calls = []
    real = short_attention.unfused_attention
    monkeypatch.setattr(short_attention, "unfused_attention", lambda *a: calls.append(a[0].shape) or real(*a))
    assert short_attention.install("cuda")
    assert together() == fused
    assert any(shape[0] == 2 for shape in calls)  # the two prompts went through it as one padded batch


# --- bucketed prefill attention (MLXCTL_ATTENTION_BUCKETS=1) and MLX's thrashing check ---

@pytest.mark.parametrize("queries,keys", [(40, 40), (40, 300), (130, 130), (200, 513), (256, 512)])
def test_a_bucketed_pass_matches_the_fused_call_for_every_mask_form(queries, keys):
    q, k, v = qkv(queries, keys)
    left = mx.arange(keys)[None, None, None, :] >= mx.array([0, 5])[:, None, None, None]  # per-row padding
    causal = mx.arange(keys - queries, keys)[:, None] >= mx.arange(keys)[None]
    for mask in ("causal", None, causal, left & causal, mx.where(left & causal, 0.0, -1e9)):
        got = short_attention.bucketed_attention(q, k, v, 0.125, mask)
        want = short_attention._FUSED(q, k, v, scale=0.125, mask=mask)
        assert got.shape == want.shape and not mx.isnan(got).any().item()
        sees_a_key = (left & causal).any(-1) if queries == keys else mx.ones((2, 1, queries), mx.bool_)
        close = mx.abs(got - want).max(-1) < 1e-5  # (batch, heads, queries)
        assert mx.all(close | ~sees_a_key).item()  # a query that may see no key: finite, its value unused


def test_prompts_of_nearby_lengths_reach_the_fused_call_in_one_shape(monkeypatch):
    seen = []
    real = short_attention._FUSED
    monkeypatch.setattr(short_attention, "_FUSED", lambda q, k, v, **kw: seen.append((q.shape, k.shape)) or real(q, k, v, **kw))
    for n in (33, 70, 127, 128):
        q, k, v = qkv(n, n)
        short_attention.bucketed_attention(q, k, v, 0.1, "causal")
    assert {shape for shape in seen} == {((2, 8, 128, 32), (2, 2, 256, 32))}


def test_rows_round_up_to_a_power_of_two_and_the_padded_rows_are_dropped(monkeypatch):
    """Prompts prefilled together come in any number: 3, 5 or 7 rows reach the fused call as 4
    or 8, the extra rows zeros that see every real key, and the output keeps the real rows."""
    assert [short_attention.bucket_rows(b) for b in (1, 2, 3, 4, 5, 7, 8, 9)] == [1, 2, 4, 4, 8, 8, 8, 16]
    seen = []
    real = short_attention._FUSED
    monkeypatch.setattr(short_attention, "_FUSED", lambda q, k, v, **kw: seen.append((q.shape[0], kw["mask"].shape[0]))
                        or real(q, k, v, **kw))
    for rows in (3, 5):
        q, k, v = qkv(40, 100, batch=rows)
        left = mx.arange(100)[None, None, None, :] >= mx.arange(rows)[:, None, None, None] * 3  # per-row padding
        for mask in ("causal", left & (mx.arange(60, 100)[:, None] >= mx.arange(100)[None])):
            got = short_attention.bucketed_attention(q, k, v, 0.125, mask)
            assert got.shape == q.shape
            assert mx.allclose(got, real(q, k, v, scale=0.125, mask=mask), atol=1e-5).item()
    assert [b for b, _ in seen] == [4, 4, 8, 8]
    assert [m for _, m in seen] == [1, 4, 1, 8]  # a causal mask broadcasts; a per-row one is padded


def test_the_layers_of_one_pass_share_one_bucketed_mask():
    """Every layer hands over the same mask: it is made once (MLX operations a layer would cost
    more than a short prompt's attention on CUDA), and made anew for another mask or shape."""
    q, k, v = qkv(40, 100)
    mask = mx.arange(100)[None, None, None, :] >= mx.array([0, 5])[:, None, None, None]
    shape = (2, 8, 128, 256)
    first = short_attention._bucket_bias(mask, 40, 100, shape, q.dtype)
    assert short_attention._bucket_bias(mask, 40, 100, shape, q.dtype) is first
    assert short_attention._bucket_bias(mx.array(mask), 40, 100, shape, q.dtype) is not first  # another array
    causal = short_attention._bucket_bias("causal", 40, 100, shape, q.dtype)
    assert short_attention._bucket_bias("causal", 40, 100, shape, q.dtype) is causal
    assert short_attention._bucket_bias("causal", 41, 100, shape, q.dtype) is not causal


def test_buckets_are_off_unless_asked_and_install_turns_the_thrashing_check_off(monkeypatch):
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", short_attention._FUSED)
    assert short_attention.install("cuda")
    assert os.environ["MLX_ENABLE_CACHE_THRASHING_CHECK"] == "0"
    assert not short_attention.wants_buckets(512, None, 1, 512)
    monkeypatch.setenv(short_attention.BUCKETS_ENV, "1")
    monkeypatch.setenv("MLX_ENABLE_CACHE_THRASHING_CHECK", "1")  # a user's own setting stands
    assert short_attention.install("cuda")
    assert os.environ["MLX_ENABLE_CACHE_THRASHING_CHECK"] == "1"
    assert [short_attention.wants_buckets(n, None, 1, 600) for n in (1, 32, 33, 4096)] == [False, False, True, True]
    assert not short_attention.wants_buckets(512, mx.zeros((8,)), 1, 600)  # attention sinks: as before
    assert not short_attention.wants_buckets(4096, None, 8, 32768)  # its mask would exceed MAX_SCORES
    for word, on in (("true", True), ("0", False), ("false", False), ("off", False)):
        monkeypatch.setenv(short_attention.BUCKETS_ENV, word)
        short_attention.install("cuda")
        assert short_attention.wants_buckets(512, None, 1, 600) is on, word


def test_the_cli_sets_mlxs_environment_defaults_before_any_command_runs():
    import subprocess
    import sys

    code = ("import os, sys\nfrom mlxctl.cli.app import main\ntry:\n    main(['--version'])\n"
            "except SystemExit:\n    print(os.environ.get('MLX_ENABLE_CACHE_THRASHING_CHECK'))")
    env = {k: v for k, v in os.environ.items() if k != mlx_env.THRASHING_CHECK}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0"
    env[mlx_env.THRASHING_CHECK] = "1"  # a user's own setting stands
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "1"


def test_the_engine_decodes_the_same_greedy_tokens_with_prefill_buckets(monkeypatch):
    """Prompts of different lengths prefilled together, and one long enough for chunks after a
    cached prefix (a continuation chunk's keys include the cache): the same tokens as MLX's
    fused call on the exact shapes."""
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.scheduler import SchedulerConfig
    from tests.engine.tiny import tiny_loaded

    prompts = [[(i * 7 + 3) % 60 for i in range(n)] for n in (45, 90, 37, 300)]
    params = SamplingParams(temperature=0, max_tokens=10)
    config = EngineConfig(SchedulerConfig(prefill_chunk=128))

    def together():
        with Engine(lambda: tiny_loaded(), config) as engine:
            return [s.collect().token_ids for s in [engine.submit(p, params) for p in prompts]]

    fused = together()
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", short_attention._FUSED)
    monkeypatch.setenv(short_attention.BUCKETS_ENV, "1")
    calls = []
    real = short_attention.bucketed_attention
    monkeypatch.setattr(short_attention, "bucketed_attention", lambda *a: calls.append(a[0].shape) or real(*a))
    assert short_attention.install("cuda")
    assert together() == fused
    assert len(calls) > 2 and any(shape[0] > 1 for shape in calls)  # batched and chunked prefills went through it
