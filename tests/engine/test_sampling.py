import math

import mlx.core as mx
import numpy as np
import pytest

from mlxctl.engine.sampling import (
    SamplingParams,
    TokenSampler,
    arrays_to_eval,
    sample_batch,
)
from mlxctl.errors import BadInputError

V = 8


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - (np.log(np.sum(np.exp(x - x.max()))) + x.max())


def make(vocab: int = V, prompt=(), **kwargs) -> TokenSampler:
    return TokenSampler(SamplingParams(**kwargs), vocab, list(prompt))


def force(sampler: TokenSampler, token: int) -> None:
    """Make a greedy sampler generate ``token`` (records it in its penalty state)."""
    logits = mx.full((sampler.vocab_size,), -1000.0).at[token].add(2000.0)
    assert sampler.sample(logits).token.item() == token


def draws(sampler: TokenSampler, logits: mx.array, n: int = 400) -> set[int]:
    tokens = [sampler.sample(logits).token for _ in range(n)]
    mx.eval(tokens)
    return {t.item() for t in tokens}


# --- SamplingParams ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"temperature": 3.5}, "temperature must be between 0 and 2, got 3.5"),
        ({"temperature": -0.1}, "temperature must be between 0 and 2"),
        ({"temperature": math.nan}, "temperature must be between 0 and 2"),
        ({"top_p": 0.0}, "top_p must be greater than 0 and at most 1, got 0.0"),
        ({"top_p": 1.5}, "top_p must be greater than 0 and at most 1"),
        ({"top_k": -1}, "top_k must be at least 0"),
        ({"min_p": 1.5}, "min_p must be between 0 and 1, got 1.5"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be greater than 0"),
        ({"presence_penalty": 2.5}, "presence_penalty must be between -2 and 2, got 2.5"),
        ({"frequency_penalty": -3}, "frequency_penalty must be between -2 and 2, got -3"),
        ({"max_tokens": 0}, "max_tokens must be at least 1, got 0"),
        ({"top_logprobs": 21, "logprobs": True}, "top_logprobs must be between 0 and 20, got 21"),
        ({"top_logprobs": 3}, "top_logprobs needs logprobs to be true"),
        ({"logit_bias": {1: 101.0}}, "logit_bias for token 1 must be between -100 and 100"),
        ({"logit_bias": {-1: 1.0}}, "logit_bias token id must be at least 0, got -1"),
        ({"stop": ("",)}, "stop must contain only non-empty strings"),
    ],
)
def test_validate_names_field_and_range(kwargs, expected):
    with pytest.raises(BadInputError, match="^" + expected.replace("(", r"\(")):
        SamplingParams(**kwargs).validate()


def test_validate_rejects_token_ids_outside_the_vocab():
    with pytest.raises(BadInputError, match="logit_bias token id must be between 0 and 7, got 8"):
        SamplingParams(logit_bias={8: 1.0}).validate(vocab_size=V)
    with pytest.raises(BadInputError, match="stop_token_ids token id must be between 0 and 7"):
        SamplingParams(stop_token_ids=(9,)).validate(vocab_size=V)
    with pytest.raises(BadInputError):
        make(logit_bias={8: 1.0})


def test_defaults_validate_and_containers_are_frozen():
    params = SamplingParams(logit_bias={3: 1, 5: -2.5}, stop=["a"], stop_token_ids=[2])
    params.validate(vocab_size=V)
    assert params.logit_bias == ((3, 1.0), (5, -2.5))
    assert params.stop == ("a",) and params.stop_token_ids == (2,)
    assert SamplingParams(stop="x").stop == ("x",)
    hash(params)
    assert not SamplingParams().is_greedy
    assert SamplingParams(temperature=0).is_greedy and SamplingParams(top_k=1).is_greedy


# --- choosing tokens --------------------------------------------------------------------------


def test_greedy_is_argmax():
    rows = mx.random.normal((6, 50), key=mx.random.key(0))
    for row in rows:
        sampler = make(50, temperature=0)
        assert sampler.sample(row).token.item() == int(np.argmax(np.array(row)))


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.0])
def test_top_k_1_is_greedy_at_any_temperature(temperature):
    rows = mx.random.normal((6, 50), key=mx.random.key(1))
    for row in rows:
        sampler = make(50, temperature=temperature, top_k=1)
        assert sampler.sample(row).token.item() == int(np.argmax(np.array(row)))


def test_seeded_sampling_is_reproducible():
    logits = mx.zeros((V,))
    first = [make(seed=7).sample(logits).token.item() for _ in range(3)]
    a, b, c = make(seed=7), make(seed=7), make(seed=8)
    seq_a = [a.sample(logits).token.item() for _ in range(30)]
    seq_b = [b.sample(logits).token.item() for _ in range(30)]
    seq_c = [c.sample(logits).token.item() for _ in range(30)]
    assert seq_a == seq_b != seq_c
    assert len(set(first)) == 1 and len(set(seq_a)) > 1


def test_seeded_row_is_the_same_alone_or_in_a_batch():
    logits = mx.random.normal((3, 40), key=mx.random.key(2))
    alone = make(40, seed=11, temperature=1.5)
    in_batch = [make(40, temperature=0.7), make(40, seed=11, temperature=1.5), make(40, seed=3)]
    for _ in range(25):
        expected = alone.sample(logits[1]).token
        assert sample_batch(logits, in_batch).tokens[1].item() == expected.item()


def test_top_k_keeps_the_k_most_likely():
    logits = mx.array([3.0, 2.0, 1.0, 0.5, 0.0, -1.0, -2.0, -3.0])
    assert draws(make(top_k=2, seed=0), logits) == {0, 1}


def test_top_p_keeps_the_smallest_set_reaching_the_mass():
    logits = mx.log(mx.array([0.5, 0.3, 0.15, 0.05]))
    assert draws(make(4, top_p=0.75, seed=0), logits) == {0, 1}
    assert draws(make(4, top_p=0.85, seed=0), logits) == {0, 1, 2}
    assert draws(make(4, top_p=0.4, seed=0), logits) == {0}


def test_top_p_measures_mass_among_the_top_k_survivors():
    logits = mx.log(mx.array([0.4, 0.3, 0.2, 0.1]))
    assert draws(make(4, top_p=0.75, seed=0), logits) == {0, 1, 2}
    # after top_k=3 the survivors renormalise to 4/9, 3/9, 2/9: the first two reach 0.75
    assert draws(make(4, top_k=3, top_p=0.75, seed=0), logits) == {0, 1}


def test_min_p_keeps_tokens_above_the_scaled_maximum():
    logits = mx.log(mx.array([0.5, 0.3, 0.15, 0.05]))
    assert draws(make(4, min_p=0.25, seed=0), logits) == {0, 1, 2}
    assert draws(make(4, min_p=0.7, seed=0), logits) == {0}


def test_filters_apply_after_temperature():
    # At temperature 2 the mass is flatter, so top_p=0.75 needs a third token.
    logits = mx.log(mx.array([0.5, 0.3, 0.15, 0.05]))
    assert draws(make(4, top_p=0.75, temperature=2.0, seed=0), logits) == {0, 1, 2}


def test_unfiltered_sampling_follows_the_distribution():
    logits = mx.log(mx.array([0.7, 0.2, 0.1]))
    sampler = make(3, seed=5)
    tokens = [sampler.sample(logits).token for _ in range(3000)]
    mx.eval(tokens)
    freq = np.bincount([t.item() for t in tokens], minlength=3) / 3000
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1], atol=0.03)


# --- penalties and bias -----------------------------------------------------------------------


def processed(sampler: TokenSampler, logits) -> list[float]:
    return np.array(sampler.process_logits(mx.array(logits, dtype=mx.float32))).tolist()


def test_logit_bias_is_added():
    sampler = make(4, logit_bias={1: 5.0, 3: -2.0}, temperature=0)
    assert processed(sampler, [0, 0, 1, 1]) == [0, 5, 1, -1]
    assert sampler.sample(mx.zeros((4,))).token.item() == 1


def test_repetition_penalty_covers_prompt_and_generated_tokens():
    sampler = make(5, prompt=[0, 1], repetition_penalty=2.0, temperature=0)
    logits = [2.0, -2.0, 2.0, -2.0, 1.0]
    assert processed(sampler, logits) == [1.0, -4.0, 2.0, -2.0, 1.0]
    force(sampler, 2)
    force(sampler, 2)  # multiplicative once, however often it occurs
    assert processed(sampler, logits) == [1.0, -4.0, 1.0, -2.0, 1.0]


def test_presence_and_frequency_penalties_cover_generated_tokens_only():
    sampler = make(4, prompt=[3], presence_penalty=0.5, frequency_penalty=0.25, temperature=0)
    force(sampler, 1)
    force(sampler, 1)
    force(sampler, 2)
    # token 1: 2 * 0.25 + 0.5; token 2: 1 * 0.25 + 0.5; token 3 (prompt only): untouched
    assert processed(sampler, [1.0, 1.0, 1.0, 1.0]) == [1.0, 0.0, 0.25, 1.0]


def test_bias_comes_before_the_repetition_penalty():
    sampler = make(3, prompt=[1], logit_bias={1: 3.0}, repetition_penalty=2.0, temperature=0)
    assert processed(sampler, [0.0, -2.0, 0.0]) == [0.0, 0.5, 0.0]


def test_penalties_steer_sampling_away_from_repeats():
    sampler = make(3, frequency_penalty=2.0, temperature=0)
    tokens = [sampler.sample(mx.array([1.0, 0.9, 0.8])).token.item() for _ in range(6)]
    assert tokens == [0, 1, 2, 0, 1, 2]


def test_pipelined_loop_with_lazy_previous_token():
    sampler = make(6, seed=1, presence_penalty=1.0, logprobs=True)
    table = mx.random.normal((6, 6), key=mx.random.key(4))
    token = mx.array(0, dtype=mx.int32)
    for _ in range(5):
        batch = sample_batch(table[token][None], [sampler])  # logits depend on a lazy token
        mx.async_eval(arrays_to_eval(batch))
        token = batch.tokens[0]
    assert 0 <= token.item() < 6


# --- logprobs ---------------------------------------------------------------------------------


def test_logprobs_are_processed_log_softmax_with_sorted_top_n():
    raw = np.random.default_rng(0).normal(size=20).astype(np.float32)
    sampler = make(20, logprobs=True, top_logprobs=5, logit_bias={4: 2.0}, temperature=0.5)
    out = sampler.sample(mx.array(raw))
    reference = log_softmax(raw + np.eye(20, dtype=np.float32)[4] * 2.0)
    token = out.token.item()
    assert out.logprobs.logprob.item() == pytest.approx(reference[token], abs=1e-5)
    top_ids = np.array(out.logprobs.top_ids).tolist()
    assert top_ids == np.argsort(-reference)[:5].tolist()
    np.testing.assert_allclose(np.array(out.logprobs.top_logprobs), reference[top_ids], atol=1e-5)


def test_logprobs_without_top_n():
    out = make(logprobs=True, temperature=0).sample(mx.arange(V, dtype=mx.float32))
    assert out.token.item() == V - 1
    assert out.logprobs.top_ids is None and out.logprobs.top_logprobs is None
    expected = log_softmax(np.arange(V))[V - 1]
    assert out.logprobs.logprob.item() == pytest.approx(expected, abs=1e-5)


# --- batches ----------------------------------------------------------------------------------


def test_fast_path_matches_per_row_sampling(monkeypatch):
    logits = mx.random.normal((4, 64), key=mx.random.key(3))
    per_row = [make(64, temperature=0).sample(row).token.item() for row in logits]

    def no_per_row(*_args):
        raise AssertionError("the all-greedy batch must not sample row by row")

    monkeypatch.setattr(TokenSampler, "sample", no_per_row)
    batch = sample_batch(logits, [make(64, temperature=0) for _ in range(4)])
    assert batch.tokens.dtype == mx.int32
    assert batch.tokens.tolist() == per_row
    assert batch.per_row == [None] * 4
    assert arrays_to_eval(batch) == [batch.tokens]


def test_mixed_batch_returns_tokens_and_logprobs_per_row():
    logits = mx.random.normal((3, 16), key=mx.random.key(5))
    samplers = [
        make(16, temperature=0),
        make(16, temperature=0, logprobs=True, top_logprobs=2),
        make(16, seed=1, presence_penalty=0.5),
    ]
    batch = sample_batch(logits, samplers)
    arrays = arrays_to_eval(batch)
    mx.eval(arrays)
    assert batch.tokens.shape == (3,) and batch.tokens.dtype == mx.int32
    assert batch.tokens[0].item() == int(np.argmax(np.array(logits[0])))
    assert batch.per_row[0] is None and batch.per_row[2] is None
    assert batch.per_row[1].top_ids.tolist()[0] == batch.tokens[1].item()
    for array in batch.per_row[1].arrays():
        assert any(array is queued for queued in arrays)


SHARED_SETTINGS = [
    dict(temperature=0.7), dict(temperature=1.3, top_k=5), dict(temperature=0.9, top_p=0.6),
    dict(temperature=1.0, top_k=7, top_p=0.8), dict(temperature=0.5, min_p=0.2), dict(temperature=0.0),
    dict(temperature=1.1, top_k=3, top_p=0.9, min_p=0.1), dict(temperature=2.0, top_k=1),
]


def test_rows_sampled_together_keep_exactly_the_tokens_their_own_filters_keep():
    from mlxctl.engine.shared_sampling import filtered_logits

    logits = mx.random.normal((len(SHARED_SETTINGS), 64), key=mx.random.key(5)) * 3
    samplers = [make(64, **kw) for kw in SHARED_SETTINGS]
    together = filtered_logits(logits, [s.params for s in samplers])
    for row, s in enumerate(samplers):
        if s.params.is_greedy:
            continue
        alone = s._filter(logits[row] / s.params.temperature)
        assert mx.array_equal(mx.isinf(together[row]), mx.isinf(alone)).item(), SHARED_SETTINGS[row]
        kept = ~mx.isinf(alone)
        assert mx.allclose(mx.where(kept, together[row], 0), mx.where(kept, alone, 0)).item()


def test_rows_sampled_together_draw_from_each_rows_own_distribution():
    """8,000 draws of each row in one batch (chi-square against the row's own filtered
    softmax); greedy rows are their argmax every time."""
    from mlxctl.engine.shared_sampling import sample_shared

    base = mx.random.normal((len(SHARED_SETTINGS), 12), key=mx.random.key(9)) * 2
    samplers = [make(12, **kw) for kw in SHARED_SETTINGS]
    n = 8000
    rows = mx.repeat(base, n, axis=0)
    drawn = sample_shared(rows, [s.params for s in samplers for _ in range(n)]).reshape(len(samplers), n)
    for row, s in enumerate(samplers):
        got = [int(c) for c in (drawn[row][:, None] == mx.arange(12)[None]).sum(axis=0).tolist()]
        if s.params.is_greedy:
            assert got[mx.argmax(base[row]).item()] == n
            continue
        expect = mx.softmax(s._filter(base[row] / s.params.temperature)).tolist()
        assert all(c == 0 for c, p in zip(got, expect) if p == 0), SHARED_SETTINGS[row]
        chi2 = sum((c - n * p) ** 2 / (n * p) for c, p in zip(got, expect) if p > 0)
        df = sum(p > 0 for p in expect) - 1
        assert chi2 < df + 6 * (2 * df) ** 0.5 + 10, (SHARED_SETTINGS[row], chi2, df)


def test_a_batch_mixing_shared_and_own_rows_puts_each_token_in_its_row():
    logits = mx.zeros((5, 10))
    hot = [3, 7, 1, 9, 4]
    logits = logits + mx.eye(10)[mx.array(hot)] * 50  # every row's one likely token
    samplers = [make(10, temperature=0.8), make(10, seed=4, temperature=0.8), make(10, temperature=1.0, top_p=0.9),
                make(10, logprobs=True), make(10, temperature=0.5)]
    out = sample_batch(logits, samplers)
    assert out.tokens.tolist() == hot
    assert [r is None for r in out.per_row] == [True, True, True, False, True]
    assert sum(s.shares_batch for s in samplers) == 3
