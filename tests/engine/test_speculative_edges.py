"""Speculative decoding at its edges: a step that fails between a proposal and its emission, a
sliding window that fills, policy notes of steps never recorded (each of these failed before
the fix that came with it), and rows of a batch that keep different counts under penalties,
seeds, filters, logprobs and stops, filled-out rows and their counters, and ``max_tokens``.

Tiny random-weight models only (tests/engine/tiny.py, hybrid_configs.py); drafts are scripted
from the plain replies where a random model's replies would not repeat, so that checks keep
part of their drafts, rows of a batch keep different counts, and stops fall inside accepted
drafts."""

from __future__ import annotations

import dataclasses

import mlx.core as mx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.speculative import DraftProposer, NgramProposer, SpeculationConfig
from tests.engine.tiny import TinyModel, tiny_llama, tiny_loaded

# every eligible step checks (no policy), batches speculate on the CPU too
EAGER = SpeculationConfig(mode="ngram", num_draft_tokens=6, max_rows=8, measured=False)
VOCAB = 64


def _script(monkeypatch, prompts: list[list[int]], replies: list[tuple[int, ...]], wrong_every: list[int]) -> list:
    """Prompt lookup replaced by the plain replies' next tokens, request i's drafted wrong at
    every ``wrong_every[i]``-th reply position (so rows keep different counts); returns a log of
    (request index, tokens generated before the pending one, k asked) for each proposal."""
    asked = []

    def propose(self, history, k):
        i = next(i for i, p in enumerate(prompts) if history[:len(p)] == p)
        start = len(history) - len(prompts[i])  # the reply position the draft starts at
        asked.append((i, start - 1, k))
        every = wrong_every[i]
        return [(t + 1) % VOCAB if (start + j) % every == every - 1 else t
                for j, t in enumerate(replies[i][start:start + k])]

    monkeypatch.setattr(NgramProposer, "propose", propose)
    monkeypatch.setattr(NgramProposer, "likely", lambda self, prompt, generated: True)
    monkeypatch.setattr(NgramProposer, "following", lambda self, m: [])
    return asked


def _assert_same(a, b) -> None:
    """Token for token, and everything a client sees of it, as plain decoding."""
    assert (a.token_ids, a.text, a.finish_reason, a.usage) == (b.token_ids, b.text, b.finish_reason, b.usage)
    assert bool(a.logprobs) == bool(b.logprobs)
    for x, y in zip(a.logprobs or (), b.logprobs or ()):
        assert x.token_id == y.token_id and x.logprob == pytest.approx(y.logprob, abs=1e-4)
        assert [t.token_id for t in x.top] == [t.token_id for t in y.top]
        assert [t.logprob for t in x.top] == pytest.approx([t.logprob for t in y.top], abs=1e-4)


# -- recovery and the policy ---------------------------------------------------------------------

def test_draft_proposer_after_a_pending_token_a_failed_step_never_emitted():
    """speculative.py DraftProposer.propose: ``keep`` started at ``_known``, the length of the
    last proposal's history, pending token included. After a step fails between the proposal
    and the emission of that pending token, the request resumes with another pending token
    at the same position. (1) History no longer than before: nothing was left to feed, and the
    draft model was called on an empty array (``ValueError: [gather] ... Indices must be
    integral``). (2) History longer (a plain step emitted the new token first): the never-emitted
    token stayed in the draft model's cache, under the tokens that follow. NgramProposer forgets
    such a token (test_speculative.py: test_a_pending_token_a_failed_step_never_emitted_is_forgotten)."""
    model = tiny_llama(layers=2)
    history = list(range(1, 30))
    for resumed in ([40], [40, 41]):  # the new pending token alone, or after a plain step emitted it
        proposer = DraftProposer(model)
        proposer.propose(history + [5], 4)  # 5 was pending; the step then failed
        again = proposer.propose(history + resumed, 4)
        fresh = DraftProposer(model)
        assert again == fresh.propose(history + resumed, 4)
        n = len(history) + len(resumed)  # what the draft model saw of the request's own tokens
        for ours, theirs in zip(proposer.cache, fresh.cache):
            assert ours.offset == theirs.offset
            assert mx.allclose(ours.keys[..., :n, :], theirs.keys[..., :n, :], atol=1e-5).item()


def test_a_draft_model_request_survives_one_failed_check(monkeypatch):
    """The engine side of the bug above: a step that fails once (out of memory, a bad kernel)
    should cost a retry, as it does with prompt lookup (the request resumes from its checkpoint
    and decodes the plain reply). With ``--speculative draft`` each retry failed in
    DraftProposer.propose on the empty input, so the request ended with an error after
    ``max_retries`` attempts."""
    from mlxctl.engine import speculative_step
    from mlxctl.engine.runner import ModelRunner

    prompt, params = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2], SamplingParams(temperature=0, max_tokens=20)
    with Engine(lambda: tiny_loaded()) as engine:
        plain = engine.submit(prompt, params).collect()
    monkeypatch.setattr(speculative_step, "load_draft", lambda spec, target: TinyModel(model=tiny_llama(seed=1)))
    real, calls = ModelRunner.verify, []

    def fails_once(self, batch, rows):
        calls.append(len(calls))
        if len(calls) == 2:  # the second check, after its draft was proposed
            raise RuntimeError("injected: one failed check")
        return real(self, batch, rows)

    monkeypatch.setattr(ModelRunner, "verify", fails_once)
    spec = SpeculationConfig("draft", 4, draft_model="tiny-draft", max_rows=1, measured=False)
    with Engine(lambda: tiny_loaded(), EngineConfig(speculation=spec, retry_backoff_s=0.001)) as engine:
        out = engine.submit(prompt, params).collect()  # raised EngineError before the fix
        assert engine.stats()["failed_steps"] == 1
    assert out.token_ids == plain.token_ids and out.finish_reason is FinishReason.LENGTH


def test_ngram_proposer_forgets_a_never_emitted_pending_token_once_the_reply_grew_past_it():
    """speculative.py NgramProposer.likely forgot a proposal's pending token only while the
    history is shorter than the proposer's tokens. If the step after the proposal failed and
    the resumed request emits its new token in a step that does not look for drafts (another
    row aborted or over ``spec_rows``, a grammar not yet active), the lengths were equal again,
    and the never-emitted token stayed in the index: later drafts are looked up in a history
    the request never had (a lower acceptance, not a wrong reply)."""
    p = NgramProposer()
    assert p.propose([5, 6, 7, 8, 1, 5, 6, 7], 2) == [8, 1]  # 7 was pending; the step then failed
    p.likely([5, 6, 7, 8], [1, 5, 6, 9])  # resumed: 9 sampled instead, emitted by a plain step
    assert p.tokens == [5, 6, 7, 8, 1, 5, 6, 9]
    # (5, 6) last occurred before 9: the copy is 9, 5 (not 7, 5 from the stale token)
    assert p.propose([5, 6, 7, 8, 1, 5, 6, 9, 5, 6], 2) == [9, 5]


def test_a_full_sliding_window_does_not_give_up_the_pipeline_for_good(monkeypatch):
    """speculative_step.py likely_rows: a lone request's sliding window (RotatingKVCache) cannot
    be cut once it is full, and it stays full, so ``speculate`` can never check again
    (``can_roll_back`` is False) and falls back to an unpipelined plain step. likely_rows did
    not ask, so every later step with a likely draft waits for its pending token on the host
    (the overlap a plain step has is lost) and counts as a speculative step that checked
    nothing; the policy never measured a check at this size, so ``choose`` kept answering yes
    (``(rows, True) not in self.seconds``). Here the prompt alone overfills the window: not one
    check can run, and no decode step may go the speculative way."""
    from tests.engine.hybrid_configs import CONFIGS

    from mlxctl.models.dummy import build_model

    def load():
        return TinyModel(model=build_model(dict(CONFIGS["gemma3_text"], sliding_window=8)), vocab_size=100)

    prompt, params = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6], SamplingParams(temperature=0, max_tokens=24)
    with Engine(load) as engine:
        plain = engine.submit(prompt, params).collect()
    monkeypatch.setattr(NgramProposer, "likely", lambda self, prompt, generated: True)  # text that repeats
    monkeypatch.setattr(NgramProposer, "propose", lambda self, history, k: [1, 2, 3, 4][:k])
    spec = SpeculationConfig("ngram", 4, max_rows=1)  # the measured policy, as served
    with Engine(load, EngineConfig(speculation=spec)) as engine:
        out = engine.submit(prompt, params).collect()
        stats = engine.stats()["speculative"]
    assert out.token_ids == plain.token_ids
    assert stats["steps"] == 0  # no check could run
    assert stats["decode_steps"]["speculative"] == 0, stats["decode_steps"]


def test_an_unrecorded_recheck_does_not_set_a_later_steps_interval():
    """speculative_policy.py: ``choose`` notes a recheck's interval in ``_rechecking`` for
    ``record`` to pop, but engine.py ``_step`` records no step that also prefilled (nor one that
    failed), so the note outlived its step (``choose`` now drops it first). A later check that paid (``choose`` dropped the
    interval back to ``RECHECK``) and found no draft then popped that stale note and put the old,
    doubled interval back: the next decline waited 64 steps where it waits 32 (the existing
    policy test: "paying again: the next decline waits RECHECK steps again")."""
    from mlxctl.engine.speculative_policy import Policy

    policy = Policy()
    for speculative, tokens, seconds in ((True, 8, 5.0), (True, 8, 0.2), (False, 4, 1.0), (False, 4, 0.1)):
        policy.record(4, speculative, tokens, seconds)
    assert policy.cost(4) == pytest.approx(2.0)  # as in test_speculative.py's policy test
    assert [policy.choose(4, 7.9) for _ in range(Policy.RECHECK)][-1]  # a recheck, recorded
    policy.record(4, True, 8, 0.2)
    assert [policy.choose(4, 7.9) for _ in range(2 * Policy.RECHECK)][-1]  # a recheck whose step also prefilled:
    # _step does not record it
    assert policy.choose(4, 8.0)  # paying again
    policy.record(4, True, 4, 0.1, checks=0)  # that step looked and found no draft
    picks = [policy.choose(4, 1.0) for _ in range(Policy.RECHECK)]
    assert picks == [False] * (Policy.RECHECK - 1) + [True]


# -- rows, counters, limits ----------------------------------------------------------------------

PROMPTS = [[1, 2, 3, 4, 1, 2, 3, 4, 1, 2], [5, 6, 7, 5, 6, 7, 5], [9, 9, 8, 9, 9, 8, 9, 9], [3, 1, 4, 1, 5, 9, 2, 6]]


@pytest.mark.parametrize("sampling", [
    dict(temperature=0, repetition_penalty=1.3, logprobs=True, top_logprobs=3),
    dict(temperature=0.8, seed=5, frequency_penalty=0.6, presence_penalty=0.4, logprobs=True, top_logprobs=2),
    dict(temperature=0.9, seed=1, top_k=8, top_p=0.9, min_p=0.02, logit_bias={3: 2.0}),
], ids=["greedy-repetition", "seeded-penalties", "seeded-filters"])
def test_a_batch_whose_rows_keep_different_counts_matches_plain_decoding(sampling, monkeypatch):
    """on a plain-KV model (the existing batch tests are greedy on recurrent models or
    the real SmolLM2), four rows checked together, each drafted wrong at its own period (one
    never), with penalties, a seed, filters and logprobs: every reply, its logprobs and top
    logprobs, usage and finish reason are plain decoding's; a stop token and a stop string
    falling inside accepted drafts end the reply there; and the next turns, served from the
    prefix cache the speculative batch remembered (rows rolled right under more padding),
    give the plain logprobs too."""
    def jobs(replies=None):
        out = []
        for i, p in enumerate(PROMPTS):
            extra = {}
            if replies is not None and i == 1:
                extra = dict(stop_token_ids=(replies[1][13],))  # a token inside a draft
            if replies is not None and i == 3:
                extra = dict(stop=("".join(chr(97 + t % 26) for t in replies[3][9:11]),))
            out.append((p, SamplingParams(max_tokens=30, **sampling, **extra)))
        return out

    def run(config, work):
        with Engine(lambda: tiny_loaded(), config) as engine:
            streams = [engine.submit(p, sp) for p, sp in work]
            done = [s.collect() for s in streams]
            monkeypatch.undo()  # the next turns: no drafts to script
            follow = SamplingParams(temperature=0, max_tokens=6, logprobs=True, num_draft_tokens=0 if config.speculation.enabled else None)
            nxt = [engine.submit(p + list(d.token_ids) + [7, 1], follow).collect() for (p, _), d in zip(work, done)]
            return done, nxt, engine.stats()["speculative"]

    base, _, _ = run(EngineConfig(), jobs())
    work = jobs([r.token_ids for r in base])
    plain, plain_next, _ = run(EngineConfig(), work)
    assert plain[1].finish_reason is FinishReason.STOP and len(plain[1].token_ids) < 30
    _script(monkeypatch, PROMPTS, [r.token_ids for r in base], [3, 4, 1000, 5])
    spec, spec_next, stats = run(EngineConfig(speculation=EAGER), work)
    for a, b in zip(plain + plain_next, spec + spec_next):
        _assert_same(a, b)
    assert 0 < stats["accepted_tokens"] < stats["draft_tokens"]
    assert sum(n.usage.cached_tokens for n in spec_next) == sum(n.usage.cached_tokens for n in plain_next) > 0


def test_filled_out_rows_and_the_counters(monkeypatch):
    """a row with ``num_draft_tokens=0`` in a batch with drafting rows is filled out
    (its pending token repeated) and checked, but drafts nothing (its counters stay 0) and
    decodes the plain reply; a row drafting 1 token in a batch 6 wide may keep more (its fill
    matched) but counts at most 1 accepted a check; accepted never exceeds drafted, and the
    engine's totals are the rows' sums."""
    params = [SamplingParams(temperature=0, max_tokens=25, num_draft_tokens=n) for n in (0, 1, None, None)]
    with Engine(lambda: tiny_loaded()) as engine:  # (a server that does not speculate refuses the field)
        streams = [engine.submit(p, dataclasses.replace(sp, num_draft_tokens=None)) for p, sp in zip(PROMPTS, params)]
        plain = [s.collect() for s in streams]
    asked = _script(monkeypatch, PROMPTS, [r.token_ids for r in plain], [1000, 1000, 4, 3])
    with Engine(lambda: tiny_loaded(), EngineConfig(speculation=EAGER)) as engine:
        streams = [engine.submit(p, sp) for p, sp in zip(PROMPTS, params)]
        spec = [s.collect() for s in streams]
        stats = engine.stats()["speculative"]
    assert [r.token_ids for r in spec] == [r.token_ids for r in plain]
    assert (spec[0].timings.draft_tokens, spec[0].timings.accepted_tokens) == (0, 0)
    assert not any(i == 0 for i, _, _ in asked)  # the row that asked for none was never proposed for
    assert {k for i, _, k in asked if i == 1} == {1}
    assert 0 < spec[1].timings.accepted_tokens <= spec[1].timings.draft_tokens
    for r in spec:
        assert r.timings.accepted_tokens <= r.timings.draft_tokens
    assert stats["draft_tokens"] == sum(r.timings.draft_tokens for r in spec)
    assert stats["accepted_tokens"] == sum(r.timings.accepted_tokens for r in spec)


def test_a_draft_never_runs_past_max_tokens(monkeypatch):
    """drafts that are always right (so every check keeps all of its draft) are asked
    for at most the tokens the reply has room for after the pending one, and every length from
    1 to 14 ends exactly at ``max_tokens`` with the plain tokens (seeded, with logprobs)."""
    prompt = PROMPTS[0]
    lengths = range(1, 15)
    sampling = dict(temperature=0.7, seed=2, logprobs=True)
    with Engine(lambda: tiny_loaded()) as engine:
        plain = [engine.submit(prompt, SamplingParams(max_tokens=n, **sampling)).collect() for n in lengths]
    asked = []
    for n, reply in zip(lengths, plain):
        with monkeypatch.context() as m:
            log = _script(m, [prompt], [reply.token_ids], [1000])
            with Engine(lambda: tiny_loaded(), EngineConfig(speculation=EAGER)) as engine:
                out = engine.submit(prompt, SamplingParams(max_tokens=n, **sampling)).collect()
            asked += [(n, before, k) for _, before, k in log]
        _assert_same(reply, out)
        assert out.finish_reason is FinishReason.LENGTH and out.usage.completion_tokens == n
    assert asked and all(0 < k <= n - before - 1 for n, before, k in asked)
    assert any(k == n - before - 1 for n, before, k in asked)  # some drafts filled the room exactly


def test_a_reply_at_its_last_token_does_not_look_for_a_draft(monkeypatch):
    """The last token of a reply leaves no room for a draft (``max_tokens``): that step is a
    plain, pipelined one, not a step that waits for its pending token on the host to draft
    nothing (and it gives the policy no check whose best case is one token)."""
    prompt = PROMPTS[0]
    params = SamplingParams(temperature=0, max_tokens=10)
    with Engine(lambda: tiny_loaded()) as engine:
        plain = engine.submit(prompt, params).collect()
    # every other draft token wrong: after the first check each emits two tokens, so the tenth is left alone
    asked = _script(monkeypatch, [prompt], [plain.token_ids], [2])
    with Engine(lambda: tiny_loaded(), EngineConfig(speculation=EAGER)) as engine:
        out = engine.submit(prompt, params).collect()
    steps = engine.spec_policy.counts  # read once the engine thread has ended (it records a step after its events)
    assert out.token_ids == plain.token_ids
    assert asked and all(k > 0 for _, _, k in asked)
    assert steps["plain"] == 1  # the reply's last step
