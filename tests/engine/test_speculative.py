"""Speculative decoding (prompt lookup): exact against plain decoding, token for token."""

from __future__ import annotations

import dataclasses
import math

import mlx.core as mx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason
from mlxctl.engine.sampling import SamplingParams, TokenSampler
from mlxctl.engine.scheduler import SchedulerConfig
from mlxctl.engine import speculative_undo
from mlxctl.engine.speculative import NgramProposer, SpeculationConfig, accept, same_vocabulary
from mlxctl.errors import BadInputError
from tests.engine.tiny import assert_same, tiny_loaded

CODE = '''def keep(self, rows: list[int]) -> None:
    if len(rows) == len(self.requests):
        return
    self.requests = [self.requests[i] for i in rows]
    self.samples = [self.samples[i] for i in rows]
    self.tokens = self.tokens[mx.array(rows)]
'''
# batches speculate on the CPU too (by default only a lone request does there)
NGRAM = EngineConfig(speculation=SpeculationConfig(  # fixed drafts of 6 (growth: its own tests)
    mode="ngram", num_draft_tokens=6, max_rows=8, measured=False, grow=False))


# -- the proposer -------------------------------------------------------------------------------

def test_the_draft_is_what_followed_the_latest_earlier_occurrence():
    p = NgramProposer()
    assert p.propose([1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3], 3) == [4, 7, 8]  # (2, 3) last seen at 6-7
    # the longest suffix that recurs wins: (3, 4, 5)
    assert p.propose([1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 2, 3, 4, 5], 4) == [9, 2, 3, 4]


def test_no_draft_when_nothing_recurs_and_never_the_suffix_itself():
    p = NgramProposer()
    assert p.propose([5, 6, 7, 8], 4) == []
    assert p.propose([5, 6, 7, 8, 1], 4) == []  # a single repeated token is not enough
    assert p.propose([5, 6, 7, 8, 1, 5, 6], 2) == [7, 8]


def test_a_loop_drafts_k_tokens_by_copying_over_its_own_copy():
    """(1, 2) last occurred two tokens back: the draft repeats the period, not just what exists."""
    assert NgramProposer().propose([1, 2, 1, 2], 5) == [1, 2, 1, 2, 1]
    assert NgramProposer().propose([7, 5, 5, 5], 4) == [5, 5, 5, 5]  # one token over and over
    assert NgramProposer().propose([1, 2, 3, 9, 1, 2, 3], 2) == [9, 1]  # capped at k


def test_the_draft_after_one_taken_whole_goes_on_with_the_copy():
    """What a chained check drafts (``following``): the copy the last draft came from, past the
    token that will follow that draft, and on again from there at each call, over its own copy
    where it runs past the end."""
    p = NgramProposer()
    assert p.following(3) == []  # nothing proposed yet
    history = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3]  # (1, 2, 3) last ended at 3: the copy is 4 5 6 7 8 9 1 2 3 4...
    assert p.propose(history, 2) == [4, 5]
    assert p.following(3) == [7, 8, 9]  # 6 is the token after the draft: the model's, not drafted
    assert p.following(2) == [2, 3]  # after 1
    assert p.following(2) == [5, 6]  # after 4: the copy runs on over itself
    assert p.following(0) == []
    p = NgramProposer()
    assert p.propose([1, 2, 3, 1, 2], 2) == [3, 1] and p.following(1) == [3]  # (2 follows the draft)
    assert p.propose([1, 2, 3, 1, 2, 3, 1, 5, 6], 2) == [] and p.following(2) == []  # nothing recurs now: no copy


def test_a_draft_is_likely_where_the_tokens_before_the_pending_one_end_in_a_recurring_ngram():
    p = NgramProposer()
    assert not p.likely([5, 6, 7, 8], [])
    assert not p.likely([5, 6, 7, 8], [1])
    assert p.likely([5, 6, 7, 8], [1, 5, 6])  # (5, 6) occurred before
    assert p.propose([5, 6, 7, 8, 1, 5, 6, 7], 2) == [8, 1]  # the same index goes on with the pending token
    assert p.likely([5, 6, 7, 8], [1, 5, 6, 7, 8])


def test_a_pending_token_a_failed_step_never_emitted_is_forgotten():
    p = NgramProposer()
    assert p.propose([5, 6, 7, 8, 1, 5, 6, 7], 2) == [8, 1]  # 7 was pending; the step then failed
    assert p.likely([5, 6, 7, 8], [1, 5, 6]) and p.tokens == [5, 6, 7, 8, 1, 5, 6]  # resumed without it
    assert p.propose([5, 6, 7, 8, 1, 5, 6, 9], 2) == []  # (6, 9) never occurred


def test_text_that_does_not_recur_decodes_as_plain_pipelined_steps(monkeypatch):
    """Looking for drafts waits for the pending token; where none is likely the step is a plain
    one, which overlaps the host's work with the device's."""
    prompt, params = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2], SamplingParams(temperature=0, max_tokens=16)
    with Engine(lambda: tiny_loaded(), NGRAM) as engine:
        plain = engine.submit(prompt, params).collect()
        assert engine.stats()["speculative"]["steps"] > 0  # the prompt repeats: drafts were checked
    monkeypatch.setattr(NgramProposer, "likely", lambda self, prompt, generated: False)
    with Engine(lambda: tiny_loaded(), NGRAM) as engine:
        assert engine.submit(prompt, params).collect().token_ids == plain.token_ids
        assert engine.stats()["speculative"]["steps"] == 0


def test_a_draft_model_is_named_for_draft_mode_only():
    with pytest.raises(BadInputError, match="speculative mode draft needs a draft_model"):
        SpeculationConfig(mode="draft")
    with pytest.raises(BadInputError, match="used by speculative mode draft, not ngram"):
        SpeculationConfig(mode="ngram", draft_model="smollm2-135m")


def test_a_draft_model_must_share_the_vocabulary(pair):
    class Other:
        def get_vocab(self):
            return {"a": 0, "b": 1}

    tokenizer = pair[0].model.tokenizer
    assert same_vocabulary(tokenizer, tokenizer)
    assert not same_vocabulary(tokenizer, Other())


def test_bad_settings_are_refused():
    with pytest.raises(BadInputError, match="unknown speculative mode 'lookahead'"):
        SpeculationConfig(mode="lookahead")
    with pytest.raises(BadInputError, match="num_draft_tokens must be between 1 and 64, got 0"):
        SpeculationConfig(mode="ngram", num_draft_tokens=0)


# -- the acceptance rule ------------------------------------------------------------------------

def test_greedy_accepts_the_matching_prefix_and_adds_the_next_argmax():
    sampler = TokenSampler(SamplingParams(temperature=0), 5, [])
    logits = mx.array([[0, 9, 0, 0, 0], [0, 0, 9, 0, 0], [9, 0, 0, 0, 0], [0, 0, 0, 9, 0]], dtype=mx.float32)
    assert accept(sampler, logits, [1, 2, 4])[0] == [1, 2, 0]  # 4 rejected: argmax 0 follows
    assert accept(sampler, logits[:3], [1, 2])[0] == [1, 2, 0]  # all accepted, then the bonus token
    assert accept(sampler, logits, [3, 2, 0])[0] == [1]


def test_sampled_tokens_keep_the_target_distribution():
    """Accept draft x when the sampled token is x: P(first token = y) must be p(y) for every y,
    whatever the draft; a chi-square test over 3000 draws (p < 0.001 fails)."""
    probs = [0.5, 0.25, 0.15, 0.1]
    logits = mx.log(mx.array([probs, probs], dtype=mx.float32))
    sampler = TokenSampler(SamplingParams(temperature=1.0, seed=3), 4, [])
    n, counts, accepted = 3000, [0] * 4, 0
    for _ in range(n):
        tokens, _ = accept(sampler, logits, [2])
        counts[tokens[0]] += 1
        accepted += len(tokens) == 2
    chi2 = sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probs))
    assert chi2 < 16.27, (counts, chi2)  # 3 degrees of freedom
    assert abs(accepted / n - probs[2]) < 4 * math.sqrt(probs[2] * (1 - probs[2]) / n)


def test_a_seeded_sampler_draws_what_it_would_draw_one_position_at_a_time():
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=42, frequency_penalty=0.5, logprobs=True)
    logits = mx.random.normal((5, 40), key=mx.random.key(1))
    plain = TokenSampler(params, 40, [1, 2])
    one_by_one = [int(plain.sample(logits[j]).token.item()) for j in range(3)]
    spec = TokenSampler(params, 40, [1, 2])
    tokens, samples = accept(spec, logits[:3], one_by_one[:2])
    assert tokens == one_by_one and len(samples) == 3 and samples[0] is not None
    # the state went back to the emitted positions: the next draw is the next plain one
    assert int(spec.sample(logits[3]).token.item()) == int(plain.sample(logits[3]).token.item())


# -- the engine, real SmolLM2 -------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair(smollm2):
    from mlxctl.models.loader import load_model

    loaded = load_model(smollm2.path)
    engines = [Engine(lambda: loaded, config).start() for config in (EngineConfig(), NGRAM)]
    yield engines
    for engine in engines:
        engine.shutdown()


@pytest.fixture(scope="module")
def repeat_prompt(pair):
    from mlxctl.api.prompt import chat_messages, render_chat

    return render_chat(pair[0].model.tokenizer, chat_messages("Repeat this code exactly:\n\n" + CODE))


def both(pair, prompt, params):
    return [engine.submit(prompt, params).collect() for engine in pair]


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_greedy_output_is_identical_and_drafts_are_accepted(pair, repeat_prompt):
    plain, spec = both(pair, repeat_prompt, SamplingParams(temperature=0, max_tokens=60))
    assert spec.token_ids == plain.token_ids and spec.text == plain.text
    assert spec.finish_reason == plain.finish_reason
    assert spec.timings.accepted_tokens > 10 and plain.timings.draft_tokens == 0
    assert spec.usage == plain.usage
    stats = pair[1].stats()["speculative"]
    assert stats["active"] and stats["mode"] == "ngram" and stats["accepted_tokens"] >= spec.timings.accepted_tokens
    assert pair[0].stats()["speculative"] == {"mode": "off", "active": False}


@pytest.mark.slow  # the real model end to end: the slow step
def test_seeded_sampling_with_penalties_is_identical(pair, repeat_prompt):
    params = SamplingParams(temperature=0.3, top_p=0.9, seed=11, presence_penalty=0.2, max_tokens=50)
    plain, spec = both(pair, repeat_prompt, params)
    assert spec.token_ids == plain.token_ids
    assert spec.timings.draft_tokens > 0


@pytest.mark.slow  # the real model end to end: the slow step
def test_logprobs_match_plain_decoding(pair, repeat_prompt):
    plain, spec = both(pair, repeat_prompt, SamplingParams(temperature=0, max_tokens=40, logprobs=True,
                                                           top_logprobs=3))
    assert spec.token_ids == plain.token_ids and spec.timings.accepted_tokens > 0
    for a, b in zip(plain.logprobs, spec.logprobs):
        assert a.token_id == b.token_id and a.logprob == pytest.approx(b.logprob, abs=1e-3)
        assert [t.token_id for t in a.top] == [t.token_id for t in b.top]


@pytest.mark.slow  # the real model end to end: the slow step
@pytest.mark.parametrize("cut", ["stop", "length"])
def test_a_stop_string_or_the_length_limit_inside_an_accepted_draft(pair, repeat_prompt, cut):
    plain_text = both(pair, repeat_prompt, SamplingParams(temperature=0, max_tokens=60))[0].text
    params = (SamplingParams(temperature=0, max_tokens=60, stop=(plain_text[30:38],)) if cut == "stop"
              else SamplingParams(temperature=0, max_tokens=23))
    plain, spec = both(pair, repeat_prompt, params)
    assert (spec.text, spec.token_ids, spec.finish_reason) == (plain.text, plain.token_ids, plain.finish_reason)
    assert spec.finish_reason is (FinishReason.STOP if cut == "stop" else FinishReason.LENGTH)
    assert cut == "stop" or spec.usage.completion_tokens == 23


@pytest.mark.slow  # the real model end to end: the slow step
def test_the_4bit_model_drafting_for_the_float32_one_changes_nothing(pair, repeat_prompt, smollm2):
    plain = pair[0].submit(repeat_prompt, SamplingParams(temperature=0, max_tokens=40)).collect()
    seeded = SamplingParams(temperature=0.5, seed=5, max_tokens=30)
    plain_seeded = pair[0].submit(repeat_prompt, seeded).collect()
    config = EngineConfig(speculation=SpeculationConfig("draft", 4, draft_model=str(smollm2.path), draft_dtype="native"))
    with Engine(lambda: pair[0].model, config) as engine:
        assert any("Quantized" in type(m).__name__ for _, m in engine.draft.model.named_modules())
        spec = engine.submit(repeat_prompt, SamplingParams(temperature=0, max_tokens=40)).collect()
        # the policy weighs each check's expected tokens against what checks cost here (a draft
        # model's steps included) and may step back; either way the replies are the same
        assert spec.token_ids == plain.token_ids and spec.timings.accepted_tokens > 0
        assert engine.submit(repeat_prompt, seeded).collect().token_ids == plain_seeded.token_ids
        assert engine.stats()["speculative"]["mode"] == "draft"


# -- the engine, tiny random models -------------------------------------------------------------

def test_concurrent_requests_decode_as_without_speculation():
    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5], [9, 9, 8, 9, 9, 8, 9, 9]]
    params = SamplingParams(temperature=0, max_tokens=24)
    results = []
    for config in (EngineConfig(), NGRAM):
        with Engine(lambda: tiny_loaded(), config) as engine:
            streams = [engine.submit(p, params) for p in prompts]
            together = [s.collect().token_ids for s in streams]
            alone = [engine.submit(p, params).collect().token_ids for p in prompts]
            results.append((together, alone))
            drafted = engine.stats()["speculative"].get("draft_tokens")
    assert drafted > 0  # the lone requests speculated
    assert results[1] == results[0]
    assert results[0][0] == results[0][1]


@pytest.mark.parametrize("mixers", [True, False], ids=["mixers", "whole"])
@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5", "mamba", "nemotron_h", "lfm2"])
def test_a_recurrent_model_speculates_by_replaying_and_decodes_as_without(arch, mixers, caplog, monkeypatch):
    """Recurrent state cannot be cut: a rejected draft is undone by restoring the state from
    before the check and running the kept tokens again, through the recurrent mixers alone (on
    what the check gave them) or through the whole model. The drafts here are the plain reply's
    next tokens with the third one wrong, so every check keeps part of its draft."""
    import logging

    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    caplog.set_level(logging.INFO, logger="mlxctl.engine")
    prompts = [[3, 4, 5, 3, 4, 5, 3, 4], [7, 1, 7, 1, 7, 2, 9]]
    params = SamplingParams(temperature=0, max_tokens=40)

    def load():  # built on the engine thread (its stream), from the same seed each time
        return TinyModel(model=build_model(CONFIGS[arch]), vocab_size=100)

    with Engine(load, EngineConfig()) as engine:
        plain = [engine.submit(p, params).collect().token_ids for p in prompts]

    def propose(self, history, k):
        for prompt, reply in zip(prompts, plain):
            if history[:len(prompt)] == prompt:
                draft = list(reply[len(history) - len(prompt):][:k])
                if len(draft) >= 3:
                    draft[2] = (draft[2] + 1) % 100
                return draft
        raise AssertionError(history)

    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.propose", propose)
    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.likely", lambda self, prompt, generated: True)
    config = EngineConfig(speculation=dataclasses.replace(NGRAM.speculation, mixer_replay=mixers))
    with Engine(load, config) as engine:
        spec = [engine.submit(p, params).collect().token_ids for p in prompts]
        together = [s.collect().token_ids for s in [engine.submit(p, params) for p in prompts]]
        stats = engine.stats()["speculative"]
    assert spec == plain and together == plain  # alone and as a batch
    assert stats["active"] is True and 0 < stats["accepted_tokens"] < stats["draft_tokens"]
    assert "undone by restoring the recurrent state" in caplog.text
    assert (stats["mixer_replays"] > 0) is mixers  # every undo here went the asked way


def test_a_model_whose_caches_cannot_go_back_does_not_speculate_and_says_so(caplog):
    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    params = SamplingParams(temperature=0, max_tokens=12)
    outs = []
    for config in (EngineConfig(), NGRAM):
        with Engine(lambda: TinyModel(model=build_model(CONFIGS["falcon_h1"]), vocab_size=100), config) as engine:
            outs.append(engine.submit([3, 4, 5, 3, 4, 5, 3, 4], params).collect())
            stats = engine.stats()["speculative"]
    assert outs[0].token_ids == outs[1].token_ids
    assert stats["active"] is False and stats["draft_tokens"] == 0
    assert "cannot roll back a rejected draft" in caplog.text


# -- batches ------------------------------------------------------------------------------------

def test_rows_that_kept_less_are_rolled_right_under_more_left_padding():
    from types import SimpleNamespace

    from mlx_lm.models.cache import BatchKVCache

    from mlxctl.engine.speculative_undo import cut as _cut

    cache = BatchKVCache(left_padding=[0, 1])
    keys = mx.arange(2 * 6, dtype=mx.float32).reshape(2, 1, 6, 1)
    cache.update_and_fetch(keys, keys + 100)
    batch = SimpleNamespace(caches=[cache], batched=True, left=[0, 1])
    _cut(batch, kept=[3, 1], written=3)  # the last 3 positions were a draft check: row 0 keeps 3, row 1 one
    assert cache._idx == 6 and cache.left_padding.tolist() == [0, 3] and batch.left == [0, 3]
    assert cache.offset.tolist() == [6, 3]  # row 1: 5 real tokens before, less the 2 it did not keep
    k, v = cache.keys_and_values()
    assert k[0, 0, :, 0].tolist() == keys[0, 0, :, 0].tolist()
    assert k[1, 0, 3:, 0].tolist() == keys[1, 0, 1:4, 0].tolist()  # its kept tokens now end at the last column
    assert v[1, 0, 3:, 0].tolist() == (keys[1, 0, 1:4, 0] + 100).tolist()
    _cut(batch, kept=[1, 2], written=3)  # what no row kept is cut for all, then the roll
    assert cache._idx == 5 and cache.left_padding.tolist() == [1, 3] and batch.left == [1, 3]


def test_on_the_cpu_only_a_lone_request_speculates_by_default_and_checks_chain_only_when_asked(monkeypatch):
    from mlxctl.engine.speculative_step import MAX_ROWS, max_rows

    monkeypatch.setenv("MLXCTL_CHAIN_CHECKS", "1")
    assert SpeculationConfig("ngram").chain and not SpeculationConfig("ngram", chain=False).chain
    monkeypatch.delenv("MLXCTL_CHAIN_CHECKS")

    assert max_rows() == (1 if mx.default_device() == mx.cpu else MAX_ROWS)
    prompt, params = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2], SamplingParams(temperature=0, max_tokens=60)
    for settings, chains in (({}, False), ({"chain": True}, True), ({"chain": False}, False)):
        with Engine(lambda: tiny_loaded(), EngineConfig(speculation=SpeculationConfig("ngram", **settings))) as engine:
            assert engine.spec_rows == max_rows()
            engine.submit(prompt, params).collect()  # its reply loops: drafts taken whole, chains where allowed
            stats = engine.stats()["speculative"]
            assert stats["chain_checks"] is chains and (stats["chained_checks"]["queued"] > 0) is chains


def test_the_policy_checks_where_the_expected_tokens_beat_the_cost_and_rechecks():
    from mlxctl.engine.speculative_policy import Policy

    policy = Policy()
    assert policy.choose(4, 4.0)  # unknown: try it
    policy.record(4, True, 8, 5.0)  # the first check, which may have built its kernels: not counted
    assert policy.choose(4, 4.0)
    policy.record(4, True, 8, 0.2)  # a check: 0.2 s
    assert not policy.choose(4, 100.0)  # then measure plain
    policy.record(4, False, 4, 1.0)  # the refill step after a speculative one is not counted
    assert policy.cost(4) is None
    policy.record(4, False, 4, 0.1)  # a plain step: 0.1 s, so a check costs two
    assert policy.cost(4) == pytest.approx(2.0)
    assert policy.choose(4, 8.0)  # 8 tokens expected against 4 rows at twice the cost: pays
    assert [policy.choose(4, 7.9) for _ in range(Policy.RECHECK)] == [False] * (Policy.RECHECK - 1) + [True]
    # still behind: each check comes twice as late as the one before, up to MAX_RECHECK
    picks = [policy.choose(4, 7.9) for _ in range(4000)]
    checks = [i + 1 for i, pick in enumerate(picks) if pick]
    gaps = [b - a for a, b in zip([0] + checks, checks)]
    assert gaps == [64, 128, 256, 512, 1024, 1024]
    assert policy.choose(4, 8.0)  # paying again: the next decline waits RECHECK steps again
    assert [policy.choose(4, 1.0) for _ in range(Policy.RECHECK)] == [False] * (Policy.RECHECK - 1) + [True]
    policy.record(4, True, 4, 0.1, checks=0)  # that recheck found no draft: the next comes as late
    assert [policy.choose(4, 1.0) for _ in range(Policy.RECHECK)] == [False] * (Policy.RECHECK - 1) + [True]
    policy.record(4, True, 8, 0.2)  # this one checked (and lost): the next comes twice as late
    assert [policy.choose(4, 1.0) for _ in range(2 * Policy.RECHECK)] == [False] * (2 * Policy.RECHECK - 1) + [True]
    assert policy.choose(1, 0.0)  # each batch size on its own, its first check uncounted too
    policy.record(1, True, 2, 9.0)
    assert (1, True) not in policy.seconds and policy.choose(1, 0.0)
    policy.record(1, True, 9, 0.3, checks=3)  # three chained checks in one step: 0.1 s each
    policy.record(1, True, 1, 0.05, checks=0)  # looked, found no draft: not a check's cost
    assert list(policy.seconds[(1, True)]) == [pytest.approx(0.1)]
    policy.record(4, True, 8, 10.0)  # one slow check (a new shape, a pause) does not make checks dear
    assert policy.cost(4) == pytest.approx(2.0)
    policy.record(4, True, 80, 1.0)  # most of the latest do
    policy.record(4, True, 80, 1.0)
    assert policy.cost(4) == pytest.approx(10.0)
    assert policy.snapshot()["4"] == {"plain": 40.0, "speculative": 45.2, "check_cost": 10.0}
    for _ in range(Policy.SAMPLES):  # the latest SAMPLES steps only
        policy.record(4, True, 8, 0.4)
    assert policy.cost(4) == pytest.approx(4.0)


def test_a_size_that_keeps_checking_measures_its_plain_cost_again():
    """Plain steps measured while kernels were built made checks look cheap for the rest of a
    run (H100, a batch of 8): after REFRESH checks the plain side is measured again."""
    from mlxctl.engine.speculative_policy import Policy

    policy = Policy()
    policy.record(8, True, 20, 5.0)  # the first check: uncounted
    policy.record(8, True, 20, 0.02)
    policy.record(8, False, 8, 0.1)  # the refill
    policy.record(8, False, 8, 0.1)  # a plain step while its kernels were built: 0.1 s, not 0.01
    assert policy.cost(8) == pytest.approx(0.2)
    picks = []
    for _ in range(Policy.REFRESH):
        picks.append(policy.choose(8, 12.0))  # 12 tokens against 8 rows at 0.2: pays
        policy.record(8, True, 12, 0.02)
    assert all(picks)
    assert not policy.choose(8, 12.0)  # the plain cost measured again first
    policy.record(8, False, 8, 0.05)  # the refill after a check: not counted
    assert not policy.choose(8, 12.0)
    policy.record(8, False, 8, 0.01)  # built now: a check costs two plain steps
    assert policy.cost(8) == pytest.approx(2.0)
    assert not policy.choose(8, 12.0)  # 12 tokens do not pay 8 rows at twice the cost
    assert policy.choose(8, 16.0)
    # a size whose checks do not pay measures plain steps anyway: nothing is let go
    for _ in range(2 * Policy.REFRESH):
        policy.record(8, False, 8, 0.01)
    assert policy.cost(8) == pytest.approx(2.0)


def test_where_not_even_drafts_taken_whole_would_pay_the_policy_waits_longest():
    from mlxctl.engine.speculative_policy import Policy

    policy = Policy()  # one row whose check costs 20 plain steps (a draft model slower than the target)
    for seconds in (9.0, 2.0):  # the first check (uncounted), then one counted
        assert policy.choose(1, 9.0, best=9)
        policy.record(1, True, 9, seconds)
    policy.record(1, False, 1, 1.0)  # the refill after a check
    policy.record(1, False, 1, 0.1)
    assert policy.cost(1) == pytest.approx(20.0)
    # 9 tokens at best (8 drafted, all kept, and the pending one) against 20: the next check is MAX_RECHECK away
    picks = [policy.choose(1, 9.0, best=9) for _ in range(Policy.MAX_RECHECK)]
    assert picks == [False] * (Policy.MAX_RECHECK - 1) + [True]
    # where a draft taken whole would pay (best 30), a poor expectation rechecks on the usual schedule
    other = Policy()
    other.seconds = {k: v.copy() for k, v in policy.seconds.items()}
    picks = [other.choose(1, 9.0, best=30) for _ in range(Policy.RECHECK)]
    assert picks == [False] * (Policy.RECHECK - 1) + [True]


def test_a_check_is_expected_to_keep_what_each_likely_row_has_kept():
    from types import SimpleNamespace

    from mlxctl.engine.speculative import SpeculationStats
    from mlxctl.engine.speculative_step import expected_tokens

    def row(asked, generated=10, max_new=100, stats=None):
        return SimpleNamespace(params=SimpleNamespace(num_draft_tokens=asked), num_generated=generated,
                               max_new_tokens=max_new, speculation=stats or SpeculationStats())

    checked = SpeculationStats()
    checked.add(8, 2, generated=10)  # kept 2 of 8
    paused = SpeculationStats(paused_until=50)
    reqs = [row(None), row(3), row(0), row(None, stats=checked), row(None, stats=paused), row(None, max_new=13),
            row(None)]
    engine = SimpleNamespace(batch=SimpleNamespace(requests=reqs), spec_grow="",
                             config=SimpleNamespace(speculation=SimpleNamespace(num_draft_tokens=8)))
    likely = [True, True, True, True, True, True, False]
    # pending tokens 7; drafts: 8 (never checked), 3 (its own length), 0 (does not draft), 2 (what it
    # kept), 0 (paused), 2 (room for 2 more tokens), and nothing for a row whose draft is unlikely
    expected, best = expected_tokens(engine, likely)
    assert expected == pytest.approx(7 + 8 + 3 + 0 + 2 + 0 + 2)
    # every likely draft taken whole, at its full length even where the reply ends sooner
    assert best == 7 + 8 + 3 + 0 + 8 + 0 + 8


def test_a_reply_near_its_end_does_not_make_the_policy_wait_longest():
    """A draft cut short by ``max_tokens`` bounds what this check can emit, not what checks at
    its batch size can: the best case that makes a size wait ``MAX_RECHECK`` steps reads the
    full draft length (a size marked so at the end of one reply declined the next one's checks)."""
    from types import SimpleNamespace

    from mlxctl.engine.speculative import SpeculationStats
    from mlxctl.engine.speculative_policy import Policy
    from mlxctl.engine.speculative_step import expected_tokens

    ending = SimpleNamespace(params=SimpleNamespace(num_draft_tokens=None), num_generated=97,
                             max_new_tokens=100, speculation=SpeculationStats())
    engine = SimpleNamespace(batch=SimpleNamespace(requests=[ending]), spec_grow="",
                             config=SimpleNamespace(speculation=SimpleNamespace(num_draft_tokens=8)))
    expected, best = expected_tokens(engine, [True])
    assert (expected, best) == (1 + 2, 1 + 8)  # two tokens of room; a full draft's best
    policy = Policy()
    for speculative, seconds in [(False, 1.0)] * 5 + [(True, 4.0)] * 6:  # a check costs 4 plain steps
        policy.record(1, speculative, 1, seconds)
    assert not policy.choose(1, expected, best)  # 3 tokens do not pay 4 plain steps; 9 would
    # the next reply, whose text has not repeated lately (2 tokens expected): rechecked after the
    # usual interval, not after the longest
    picks = [policy.choose(1, 2.0, best) for _ in range(Policy.RECHECK)]
    assert any(picks)


def test_a_request_expects_what_its_checks_kept_and_hopes_again_as_it_decodes_plainly():
    from mlxctl.engine.speculative import EXPECT_WEIGHT, RELAX_TOKENS, SpeculationStats

    stats = SpeculationStats()
    assert stats.expect(8, 0) == 8  # never checked: its draft length
    stats.add(8, 0, generated=10)
    assert stats.expect(8, 10) == 0  # its one check kept nothing
    assert stats.expect(8, 10 + RELAX_TOKENS // 2) == pytest.approx(4)  # half way back
    assert stats.expect(8, 10 + 3 * RELAX_TOKENS) == 8
    stats.add(8, 6, generated=40)
    assert stats.expect(8, 40) == pytest.approx(EXPECT_WEIGHT * 6)


@pytest.mark.slow  # the real model end to end: the slow step
def test_a_batch_of_repeating_requests_speculates_row_by_row(pair):
    from mlxctl.api.prompt import chat_messages, render_chat

    tokenizer = pair[0].model.tokenizer
    asks = [CODE[:200], CODE[100:], "Write a haiku about the sea."]
    prompts = [render_chat(tokenizer, chat_messages("Repeat this code exactly:\n\n" + a)) for a in asks]
    params = SamplingParams(temperature=0, max_tokens=40)
    alone = [pair[0].submit(p, params).collect().token_ids for p in prompts]
    before = pair[1].stats()["speculative"]["steps"]
    streams = [pair[1].submit(p, params) for p in prompts]
    assert [s.collect().token_ids for s in streams] == alone
    assert pair[1].stats()["speculative"]["steps"] > before
    assert "3" in pair[1].stats()["speculative"]["tokens_per_s"]


def test_a_request_whose_drafts_keep_failing_pauses_drafting():
    from mlxctl.engine.speculative import MISSES, PAUSE_TOKENS, SpeculationStats

    stats = SpeculationStats()
    stats.add(4, 2, generated=10)
    for n in range(MISSES - 1):
        stats.add(4, 0, generated=11 + n)
        assert stats.drafting(12 + n)
    stats.add(4, 0, generated=20)
    assert not stats.drafting(20) and not stats.drafting(20 + PAUSE_TOKENS - 1)
    assert stats.drafting(20 + PAUSE_TOKENS) and stats.misses == 0
    assert stats.as_dict()["draft_tokens"] == 4 * (MISSES + 1)


def test_a_draft_taken_whole_doubles_the_next_up_to_the_ceiling_and_a_rejection_resets_it():
    from mlxctl.engine.speculative import SpeculationStats, grow_ceiling

    stats = SpeculationStats()
    assert stats.draft_length(8, 32) == 8
    for drafted, then in ((8, 16), (16, 32), (32, 32)):
        stats.add(drafted, drafted, ceiling=32)
        assert stats.draft_length(8, 32) == then
    stats.add(32, 5, ceiling=32)  # rejected at the sixth token: back to the request's own length
    assert stats.draft_length(8, 32) == 8
    stats.add(8, 8)  # no ceiling: drafts do not grow
    assert stats.draft_length(8, 32) == 8
    # 4x, at most 64; on CUDA at most one short of the widest unfused check (32 queries); never below k
    assert [grow_ceiling(8, "cpu"), grow_ceiling(8, "metal"), grow_ceiling(8, "cuda")] == [32, 32, 31]
    assert [grow_ceiling(20, "metal"), grow_ceiling(40, "cuda"), grow_ceiling(2, "cuda")] == [64, 40, 8]


def test_by_default_drafts_grow_while_a_request_is_alone(monkeypatch):
    """``grow=None``, the default: a lone request's drafts grow (the tiny model loops, so they
    are taken whole), a batch's never do (its check is as wide as its longest draft), nor those
    of a request that set its own ``num_draft_tokens``; the replies are plain decoding's, token
    for token; ``/v1/status`` says ``alone``."""
    from mlxctl.engine import speculative_step

    seen = []  # (rows in the batch, growing ceiling) of every draft length worked out
    real = speculative_step.draft_length

    def spy(engine, req):
        out = real(engine, req)
        seen.append((len(engine.batch), out[1]))
        return out

    monkeypatch.setattr(speculative_step, "draft_length", spy)
    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5]]
    params = SamplingParams(temperature=0, max_tokens=80)
    config = dataclasses.replace(NGRAM, speculation=dataclasses.replace(NGRAM.speculation, grow=None))
    with Engine(lambda: tiny_loaded(), EngineConfig()) as plain:
        expected = [plain.submit(p, params).collect().token_ids for p in prompts]
    with Engine(lambda: tiny_loaded(), config) as engine:
        assert engine.submit(prompts[0], params).collect().token_ids == expected[0]
        alone = engine.stats()["speculative"]
        lone, seen[:] = list(seen), []
        streams = [engine.submit(p, params) for p in prompts]
        assert [s.collect().token_ids for s in streams] == expected
        batched, seen[:] = list(seen), []
        own = dataclasses.replace(params, num_draft_tokens=6)  # its own length: kept, alone too
        assert engine.submit(prompts[0], own).collect().token_ids == expected[0]
    assert seen and all(ceiling == 0 for _, ceiling in seen)
    seen = batched
    assert alone["grow_drafts"] == "alone"
    assert alone["draft_tokens"] > 6 * alone["steps"]  # some of the lone request's drafts were longer than 6
    assert lone and all(rows == 1 and ceiling == 24 for rows, ceiling in lone)
    assert any(rows == 2 for rows, _ in seen)
    assert all(ceiling == 0 for rows, ceiling in seen if rows > 1)


def test_growing_drafts_take_fewer_steps_and_decode_the_same_tokens():
    """The tiny model falls into a loop, which prompt lookup copies whole: with growth each
    draft taken whole doubles the next (6, 12, 24), so the reply takes fewer checks, token for
    token the same."""
    prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    params = SamplingParams(temperature=0, max_tokens=80)
    runs = {}
    for grow in (False, True):
        config = dataclasses.replace(NGRAM, speculation=dataclasses.replace(NGRAM.speculation, grow=grow))
        with Engine(lambda: tiny_loaded(), config) as engine:
            done = engine.submit(prompt, params).collect()
            runs[grow] = (done.token_ids, engine.stats()["speculative"])
    (plain_ids, fixed), (grown_ids, grown) = runs[False], runs[True]
    assert grown_ids == plain_ids
    assert fixed["draft_tokens"] <= 6 * fixed["steps"]
    assert grown["draft_tokens"] > 6 * grown["steps"]  # some drafts were longer than 6
    assert grown["steps"] < fixed["steps"]
    assert (fixed["grow_drafts"], grown["grow_drafts"]) == (False, True)  # what /v1/status says


def _gemma3_unwrapped():  # sliding windows longer than these tests' replies: they speculate
    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    return TinyModel(model=build_model(dict(CONFIGS["gemma3_text"], sliding_window=128)), vocab_size=100)


def _scripted_copy(monkeypatch, prompts: list[list[int]], replies: list[tuple[int, ...]], vocab: int) -> None:
    """Prompt lookup replaced by drafts copied from the plain ``replies`` (a random model's
    replies seldom repeat), every 23rd reply position drafted wrong, so chains form and break."""
    def drafted(reply, start, stop):
        return [(t + 1) % vocab if i % 23 == 22 else t for i, t in zip(range(start, stop), reply[start:stop])]

    def propose(self, history, k):
        reply = next(r for p, r in zip(prompts, replies) if history[:len(p)] == p)
        start = len(history) - next(len(p) for p in prompts if history[:len(p)] == p)
        self._script = (reply, start + k)
        return drafted(reply, start, start + k)

    def following(self, m):
        reply, end = self._script
        self._script = (reply, end + 1 + m)
        return drafted(reply, end + 1, end + 1 + m)

    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.propose", propose)
    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.following", following)
    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.likely", lambda self, prompt, generated: True)


SEEDED = dict(temperature=0.8, seed=3, presence_penalty=0.3, logprobs=True)  # a sampler with state and logprobs


@pytest.mark.parametrize("load, sampling", [(tiny_loaded, dict(temperature=0)), (_gemma3_unwrapped, dict(temperature=0)),
                                            (tiny_loaded, SEEDED)], ids=["llama", "gemma3", "llama-seeded"])
def test_chained_checks_decode_the_same_tokens_and_leave_the_cache_as_plain_decoding_does(load, sampling, monkeypatch):
    """A lone request copying text queues its next check (its positions sampled) before reading
    this one; where a check turns out not taken whole, the queued one is cut and its draws
    forgotten. Replies (ending at every point of a chain: several lengths, a stop token) are
    token for token those of plain decoding and of checks read one at a time (seeded sampling
    with a penalty: logprobs too), and so is a next turn that reuses the remembered prompt and
    answer (a chain's queued positions are not remembered with it: a sliding-window model keeps
    the state after the answer as a checkpoint). Greedy on the tiny llama uses real prompt
    lookup (its replies loop); elsewhere the drafts are scripted from the plain replies."""
    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5], [9, 9, 8, 9, 9, 8, 9, 9],
               [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5, 3, 1, 4,
                1, 5, 9]]
    scripted = load is _gemma3_unwrapped or sampling is SEEDED
    runs, follows, counts = {}, {}, {}
    for name, config in (("off", EngineConfig()), ("one at a time", _chain(False)), ("chained", _chain(True))):
        with Engine(load, config) as engine:
            replies = []
            for p in prompts:
                whole = engine.submit(p, SamplingParams(**sampling, max_tokens=60)).collect()
                replies += [whole] + [engine.submit(p, SamplingParams(**sampling, **limit)).collect() for limit in (
                    dict(max_tokens=23), dict(max_tokens=31),
                    dict(max_tokens=60, stop_token_ids=(whole.token_ids[25],)))]  # a stop mid-chain
            # the next turns (logprobs: the tiny model's greedy tokens barely depend on its KV)
            follows[name] = [engine.submit(p + list(r.token_ids) + [7, 1, 2],
                                           SamplingParams(temperature=0, max_tokens=8, logprobs=True)).collect()
                             for p, r in zip(prompts, replies[3::4])]
            runs[name] = replies
            if scripted and name == "off":  # drafts from a script: replies that seldom repeat
                _scripted_copy(monkeypatch, prompts, [r.token_ids for r in replies[::4]],
                               100 if load is _gemma3_unwrapped else 64)
            counts[name] = engine.stats()["speculative"].get("chained_checks")
            assert sum(f.usage.cached_tokens for f in follows[name]) > 0
    assert any(len(r.token_ids) < 60 for r in runs["off"][3::4])  # some stopped early
    for name in ("one at a time", "chained"):
        for a, b in zip(runs["off"] + follows["off"], runs[name] + follows[name]):
            if a.logprobs:
                assert_same(a, b)
            assert (a.token_ids, a.finish_reason) == (b.token_ids, b.finish_reason)
    assert counts["one at a time"] == {"queued": 0, "cut": 0}
    assert counts["chained"]["queued"] > counts["chained"]["cut"] > 0, counts


def _scripted_against_plain(monkeypatch, load, vocab: int, prompts: list[list[int]], max_tokens: int) -> dict:
    """Each engine's replies (greedy, logprobs) and speculation stats: without speculation, checks
    read one at a time and chained, with drafts scripted from the plain replies."""
    params = SamplingParams(temperature=0, max_tokens=max_tokens, logprobs=True)
    runs = {}
    for name, config in (("off", EngineConfig()), ("one at a time", _chain(False)), ("chained", _chain(True))):
        with Engine(load, config) as engine:
            runs[name] = ([engine.submit(p, params).collect() for p in prompts], engine.stats()["speculative"])
        if name == "off":
            _scripted_copy(monkeypatch, prompts, [r.token_ids for r in runs[name][0]], vocab)
    for name in ("one at a time", "chained"):
        for a, b in zip(runs["off"][0], runs[name][0]):
            assert_same(a, b)
    return {name: stats for name, (_, stats) in runs.items()}


@pytest.mark.parametrize("window", [35, 38, 42, 45, 57])
def test_a_sliding_window_is_never_written_full_by_a_check(window, monkeypatch):
    """mlx-lm cuts a ``RotatingKVCache`` only while its offset is below its size: a check that
    would fill the window exactly could not be cut (nor could any layer), so it does not run,
    chained or not. Windows around where these replies' checks end."""
    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    def load():
        return TinyModel(model=build_model(dict(CONFIGS["gemma3_text"], sliding_window=window)), vocab_size=100)

    stats = _scripted_against_plain(monkeypatch, load, 100, [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5]], 60)
    assert stats["one at a time"]["accepted_tokens"] > 0 and stats["chained"]["chained_checks"]["queued"] > 0


def test_a_chunked_attention_cache_does_not_chain_checks(monkeypatch):
    """llama4's chunked-attention cache drops its front at the start of each pass by the offset
    it sees; a check queued before the one before it is cut would drop keys still needed. Such
    a model checks drafts one at a time."""
    import mlx.core as mx
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    config = dict(model_type="llama4", text_config=dict(
        model_type="llama4_text", attention_bias=False, attention_chunk_size=12, head_dim=16, hidden_size=64,
        interleave_moe_layer_step=2, intermediate_size=64, intermediate_size_mlp=128, max_position_embeddings=512,
        num_attention_heads=4, num_experts_per_tok=1, num_hidden_layers=4, num_key_value_heads=2, num_local_experts=2,
        rms_norm_eps=1e-5, rope_scaling=None, rope_theta=10000.0, use_qk_norm=True, vocab_size=64,
        no_rope_layers=[1, 1, 1, 0]))

    def load():
        mx.random.seed(0)
        return TinyModel(model=build_model(config), vocab_size=64)

    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5], [9, 9, 8, 9, 9, 8, 9, 9]]
    stats = _scripted_against_plain(monkeypatch, load, 64, prompts, 80)
    assert stats["chained"]["accepted_tokens"] > 0 and stats["chained"]["chained_checks"] == {"queued": 0, "cut": 0}


def test_a_request_the_scheduler_would_not_admit_does_not_stop_a_chain():
    """With room for one sequence, a second request waits until the first ends: it is no reason
    for the first's chain to stop short, so the two chain as much submitted together as one
    after the other (and decode the same tokens)."""
    prompts = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5]]
    one_seq = dataclasses.replace(_chain(True), scheduler=SchedulerConfig(max_num_seqs=1))
    counts, replies = {}, {}
    for together in (False, True):
        with Engine(lambda: tiny_loaded(), one_seq) as engine:
            params = SamplingParams(temperature=0, max_tokens=60)
            if together:
                streams = [engine.submit(p, params) for p in prompts]
                replies[together] = [s.collect().token_ids for s in streams]
            else:
                replies[together] = [engine.submit(p, params).collect().token_ids for p in prompts]
            counts[together] = engine.stats()["speculative"]["chained_checks"]
    assert replies[True] == replies[False]
    assert counts[False]["queued"] > 0
    assert counts[True] == counts[False]


def _chain(on: bool) -> EngineConfig:
    return dataclasses.replace(NGRAM, speculation=dataclasses.replace(NGRAM.speculation, chain=on))


def test_a_request_may_ask_for_fewer_drafts_or_none():
    prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    with Engine(lambda: tiny_loaded(), NGRAM) as engine:
        plain = engine.submit(prompt, SamplingParams(temperature=0, max_tokens=20, num_draft_tokens=0)).collect()
        assert plain.timings.draft_tokens == 0 and engine.stats()["speculative"]["steps"] == 0
        two = engine.submit(prompt, SamplingParams(temperature=0, max_tokens=20, num_draft_tokens=2)).collect()
        assert two.token_ids == plain.token_ids
        assert 0 < two.timings.draft_tokens <= 2 * engine.stats()["speculative"]["steps"]
    with Engine(lambda: tiny_loaded()) as engine:
        with pytest.raises(BadInputError, match="this server does not speculate \\(start it with --speculative\\)"):
            engine.submit(prompt, SamplingParams(num_draft_tokens=3))
        engine.submit(prompt, SamplingParams(max_tokens=2, num_draft_tokens=0)).collect()  # nothing asked: fine
    with pytest.raises(BadInputError, match="num_draft_tokens must be between 0 and 64, got 65"):
        SamplingParams(num_draft_tokens=65).validate()


# -- structured output ----------------------------------------------------------------------------

RECORD = '{"name": "keep", "rows": [1, 2, 3], "requests": [4, 5, 6], "samples": [7, 8, 9], "done": true}'


@pytest.fixture(scope="module")
def json_prompt(pair):
    from mlxctl.api.prompt import chat_messages, render_chat

    return render_chat(pair[0].model.tokenizer, chat_messages("Repeat this JSON exactly:\n\n" + RECORD))


@pytest.mark.slow  # the real model end to end: the slow step
@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=0.7, seed=4)])
def test_structured_output_speculates_and_gives_the_plain_tokens(pair, json_prompt, sampling):
    from mlxctl.engine.constraints import ConstraintSpec

    params = SamplingParams(max_tokens=70, constraint=ConstraintSpec("json_object"), **sampling)
    plain, spec = both(pair, json_prompt, params)
    assert spec.token_ids == plain.token_ids and spec.finish_reason == plain.finish_reason
    assert spec.timings.accepted_tokens > 5  # the grammar let drafts through
    import json

    assert isinstance(json.loads(spec.text), dict) or spec.finish_reason is FinishReason.LENGTH


@pytest.mark.slow  # the real model end to end: the slow step
def test_drafts_the_grammar_refuses_are_not_accepted(pair, repeat_prompt):
    """Copying the code would draft "(self, rows" after "def keep"; letters and spaces only may
    follow, so every drafted position is checked under the grammar's mask for it."""
    import re

    from mlxctl.engine.constraints import ConstraintSpec

    params = SamplingParams(temperature=0, max_tokens=40, constraint=ConstraintSpec("regex", "[a-z ]+"))
    plain, spec = both(pair, repeat_prompt, params)
    assert re.fullmatch("[a-z ]+", spec.text) and spec.token_ids == plain.token_ids
    assert spec.timings.draft_tokens > 0


@pytest.mark.slow  # the real model end to end: the slow step
def test_a_batch_mixing_grammars_and_free_rows_speculates_as_plain_decoding_decodes(pair, repeat_prompt, json_prompt):
    from mlxctl.engine.constraints import ConstraintSpec

    jobs = [(repeat_prompt, SamplingParams(temperature=0, max_tokens=30, constraint=ConstraintSpec("regex", "[a-z ]+"))),
            (json_prompt, SamplingParams(temperature=0, max_tokens=30, constraint=ConstraintSpec("json_object"))),
            (repeat_prompt, SamplingParams(temperature=0, max_tokens=30))]
    results = []
    for engine in pair:
        streams = [engine.submit(prompt, params) for prompt, params in jobs]
        results.append([s.collect() for s in streams])
    assert [r.token_ids for r in results[1]] == [r.token_ids for r in results[0]]
    assert sum(r.timings.accepted_tokens for r in results[1]) > 0


@pytest.mark.parametrize("mixers", [True, False], ids=["mixers", "whole"])
@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5", "lfm2", "mamba2"])
def test_a_batch_of_a_recurrent_model_speculates_rows_keeping_different_counts(arch, mixers, monkeypatch):
    """Rows of a hybrid or recurrent model's batch accept different counts (each row's draft is
    the plain reply's next tokens, wrong from a different position, one row's never): their
    recurrent state goes back and is brought forward over each row's kept tokens, as far as
    that row's length, by the recurrent mixers alone or by the whole model right-padded; the
    replies are those of plain decoding, alone or together."""
    from mlxctl.engine.mixer_replay import MixerTap
    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    prompts = [[3, 4, 5, 3, 4, 5, 3, 4], [7, 1, 7, 1, 7, 2, 9], [2, 8, 2, 8, 6]]
    wrong_at = {0: 1, 1: 3, 2: None}  # the draft position each prompt's drafts get wrong
    params = SamplingParams(temperature=0, max_tokens=30)

    def load():
        return TinyModel(model=build_model(CONFIGS[arch]), vocab_size=100)

    with Engine(load, EngineConfig()) as engine:
        plain = [engine.submit(p, params).collect().token_ids for p in prompts]

    def propose(self, history, k):
        for i, (prompt, reply) in enumerate(zip(prompts, plain)):
            if history[:len(prompt)] == prompt:
                draft = list(reply[len(history) - len(prompt):][:k])
                at = wrong_at[i]
                if at is not None and len(draft) > at:
                    draft[at] = (draft[at] + 1) % 100
                return draft
        raise AssertionError(history)

    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.propose", propose)
    monkeypatch.setattr("mlxctl.engine.speculative.NgramProposer.likely", lambda self, prompt, generated: True)
    refills, ragged = [], []
    real, replay = speculative_undo.refill, MixerTap.replay
    monkeypatch.setattr(speculative_undo, "refill", lambda *a: refills.append(1) or real(*a))

    def replayed(self, kept, written, restored):
        done = replay(self, kept, written, restored)
        if done and len(set(kept)) > 1:
            ragged.append(kept)
        return done

    monkeypatch.setattr(MixerTap, "replay", replayed)
    config = EngineConfig(speculation=dataclasses.replace(NGRAM.speculation, mixer_replay=mixers))
    with Engine(load, config) as engine:
        assert engine.spec_rows == NGRAM.speculation.max_rows
        together = [s.collect().token_ids for s in [engine.submit(p, params) for p in prompts]]
        stats = engine.stats()["speculative"]
    assert together == plain
    assert (ragged if mixers else refills)  # rows really kept different counts in one step, undone the asked way
    assert not (refills if mixers else ragged)
    assert 0 < stats["accepted_tokens"] < stats["draft_tokens"]
    assert stats["decode_steps"]["speculative"] > 0


@pytest.mark.parametrize("arch", ["mamba", "nemotron_h"])
def test_a_recurrent_model_that_ignores_row_lengths_speculates_one_request_at_a_time(arch, caplog):
    """Mamba's mixer does not read ``ArraysCache.lengths``, and Nemotron-H's (mlx-lm 0.32.2)
    leaves the wrong state behind with it: the load-time probe finds both out."""
    import logging

    from tests.engine.hybrid_configs import CONFIGS
    from tests.engine.tiny import TinyModel

    from mlxctl.models.dummy import build_model

    caplog.set_level(logging.INFO, logger="mlxctl.engine")
    with Engine(lambda: TinyModel(model=build_model(CONFIGS[arch]), vocab_size=100), NGRAM) as engine:
        assert engine.speculates and engine.spec_rows == 1
    assert "one request at a time" in caplog.text


def test_a_draft_model_catching_up_is_timed_apart_from_its_guesses():
    from mlxctl.engine.speculative import DraftProposer

    proposer = DraftProposer(tiny_loaded().model)
    history = list(range(1, 40))
    first = proposer.propose(history, 4)  # the whole prompt goes through it first
    assert proposer.catch_up_s > 0
    proposer.propose(history + first[:2] + [7], 4)  # two guesses kept, the next token: a check's worth
    assert proposer.catch_up_s == 0.0
    proposer.propose(history + first[:2] + [7] + list(range(50, 70)), 4)  # 20 tokens decoded plainly meanwhile
    assert proposer.catch_up_s > 0
