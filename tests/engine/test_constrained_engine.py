"""Structured output through the engine: SmolLM2's answers parse and validate, constrained and
unconstrained requests share a batch, and (on the tiny llama, with scripted matchers) the
pipeline's bookkeeping: each token advances its matcher exactly once, in order, before it is
emitted; a complete grammar stops, a dead end or a rejected token is an error."""

from __future__ import annotations

import json
import math
import re

import jsonschema
import numpy as np
import pytest

from mlxctl.engine import constraints as constraints_module
from mlxctl.engine import runner as runner_module
from mlxctl.engine.constraints import ConstraintSpec
from mlxctl.engine.engine import Engine
from mlxctl.engine.events import FinishReason
from mlxctl.engine.sampling import MASKED_LOGPROB, SamplingParams
from mlxctl.errors import BadInputError, EngineError
from tests.engine.tiny import tiny_loaded

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
PHONE = r"\d{3}-\d{4}"


def chat(engine: Engine, text: str) -> list[int]:
    return engine.model.tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                      add_generation_prompt=True)


# --- SmolLM2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_json_schema_output_validates(smollm2_engine, temperature):
    spec = ConstraintSpec("json_schema", json.dumps(PERSON))
    params = SamplingParams(temperature=temperature, seed=7, max_tokens=60, constraint=spec)
    out = smollm2_engine.submit(chat(smollm2_engine, "Describe Bob, who is 30, as JSON."), params).collect()
    assert out.finish_reason is FinishReason.STOP, out.text
    jsonschema.validate(json.loads(out.text), PERSON)


def test_json_object_output_parses(smollm2_engine):
    params = SamplingParams(temperature=0.0, max_tokens=60, constraint=ConstraintSpec("json_object"))
    prompt = chat(smollm2_engine, 'Return a JSON object with keys "city" and "country" for Paris.')
    out = smollm2_engine.submit(prompt, params).collect()
    assert out.finish_reason is FinishReason.STOP
    assert isinstance(json.loads(out.text), dict)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_regex_is_matched_exactly_and_logprobs_stay_finite(smollm2_engine, temperature):
    params = SamplingParams(temperature=temperature, seed=3, max_tokens=30, logprobs=True, top_logprobs=5,
                            ignore_eos=True, constraint=ConstraintSpec("regex", PHONE))
    out = smollm2_engine.submit(chat(smollm2_engine, "Make up a phone number."), params).collect()
    assert re.fullmatch(PHONE, out.text), out.text
    assert out.finish_reason is FinishReason.STOP  # the grammar is complete, even with ignore_eos
    values = [lp.logprob for lp in out.logprobs] + [t.logprob for lp in out.logprobs for t in lp.top]
    assert all(math.isfinite(v) and v >= MASKED_LOGPROB for v in values)


def test_constrained_and_unconstrained_share_a_batch(smollm2_engine):
    free_prompt = chat(smollm2_engine, "Write a haiku about the sea.")
    free = SamplingParams(temperature=0.0, max_tokens=16)
    alone = smollm2_engine.submit(free_prompt, free).collect()
    constrained = SamplingParams(temperature=0.0, max_tokens=30, constraint=ConstraintSpec("regex", PHONE))
    streams = [smollm2_engine.submit(free_prompt, free),
               smollm2_engine.submit(chat(smollm2_engine, "Make up a phone number."), constrained)]
    together, phone = (s.collect() for s in streams)
    assert together.token_ids == alone.token_ids
    assert re.fullmatch(PHONE, phone.text) and phone.finish_reason is FinishReason.STOP


def test_invalid_schema_is_refused_at_submit(smollm2_engine):
    bad = SamplingParams(constraint=ConstraintSpec("json_schema", '{"type": "strnig"}'))
    with pytest.raises(BadInputError, match="invalid JSON schema"):
        smollm2_engine.submit([1, 2, 3], bad)
    with pytest.raises(BadInputError, match="invalid regex"):
        smollm2_engine.submit([1, 2, 3], SamplingParams(constraint=ConstraintSpec("regex", "(")))


# --- pipeline bookkeeping on the tiny llama ------------------------------------------------


class ScriptedMatcher:
    """Allows only ``allow``; finishes, dead-ends or rejects after a given number of tokens."""

    def __init__(self, width, allow=(7,), done_after=None, dead_after=None, reject_at=None):
        self.width, self.allow = width, allow
        self.done_after, self.dead_after, self.reject_at = done_after, dead_after, reject_at
        self.seen: list[int] = []
        self.error: str | None = None
        self.rejected = False

    @property
    def needs_mask(self) -> bool:
        return self.error is None

    @property
    def done(self) -> bool:
        return self.done_after is not None and len(self.seen) >= self.done_after

    def advance(self, token_id: int) -> None:
        self.seen.append(token_id)
        if self.reject_at is not None and len(self.seen) == self.reject_at:
            self.error, self.rejected = "structured output failed: scripted rejection", True

    def fill_bitmask(self, row: np.ndarray) -> bool:
        row[:] = 0
        if self.dead_after is not None and len(self.seen) >= self.dead_after:
            self.error = "structured output failed: scripted dead end"
            return False
        for t in self.allow:
            row[t // 32] |= np.int32(1 << (t % 32))
        return True


@pytest.fixture
def tiny(monkeypatch):
    made: list[ScriptedMatcher] = []
    script: dict = {}

    class Compiled:
        def matcher(self, width):
            made.append(ScriptedMatcher(width, **script))
            return made[-1]

    monkeypatch.setattr(constraints_module, "compile_constraint", lambda spec, tokenizer: Compiled())
    loaded = tiny_loaded()
    engine = Engine(lambda: loaded).start()
    yield engine, made, script
    engine.shutdown()


SPEC = ConstraintSpec("regex", "x")


def until_error(stream) -> tuple[tuple[int, ...], FinishReason, EngineError]:
    """The tokens a stream carried before its finish event raised the engine's error."""
    tokens: list[int] = []
    with pytest.raises(EngineError) as info:
        for event in stream:
            tokens.extend(event.token_ids)
    return tuple(tokens), stream.finish.reason, info.value


def test_each_token_advances_its_matcher_once_before_it_is_emitted(tiny):
    engine, made, script = tiny
    script["allow"] = (7, 9)
    for temperature in (0.0, 1.0):
        out = engine.submit([1, 2, 3], SamplingParams(temperature=temperature, seed=1, max_tokens=9,
                                                      constraint=SPEC)).collect()
        assert set(out.token_ids) <= {7, 9} and len(out.token_ids) == 9
        assert made[-1].seen == list(out.token_ids)
        assert out.finish_reason is FinishReason.LENGTH


def test_a_complete_grammar_stops(tiny):
    engine, _, script = tiny
    script["done_after"] = 3
    out = engine.submit([4, 5], SamplingParams(temperature=0.0, max_tokens=20, constraint=SPEC)).collect()
    assert out.token_ids == (7, 7, 7) and out.finish_reason is FinishReason.STOP


def test_a_dead_end_is_an_error_not_garbage(tiny):
    engine, _, script = tiny
    script["dead_after"] = 2
    tokens, reason, error = until_error(engine.submit([4, 5], SamplingParams(temperature=0.0, max_tokens=20,
                                                                             constraint=SPEC)))
    assert tokens == (7, 7) and reason is FinishReason.ERROR and "dead end" in str(error)


def test_a_dead_end_at_the_first_token_emits_nothing(tiny):
    engine, _, script = tiny
    script["dead_after"] = 0
    script["reject_at"] = 1  # what Matcher.advance does with a token sampled past a dead end
    tokens, reason, _ = until_error(engine.submit([4, 5], SamplingParams(temperature=0.0, max_tokens=20,
                                                                         constraint=SPEC)))
    assert tokens == () and reason is FinishReason.ERROR


def test_a_rejected_token_is_never_emitted(tiny):
    engine, _, script = tiny
    script["reject_at"] = 3
    tokens, reason, error = until_error(engine.submit([4, 5], SamplingParams(temperature=0.0, max_tokens=20,
                                                                             constraint=SPEC)))
    assert tokens == (7, 7) and reason is FinishReason.ERROR and "scripted rejection" in str(error)


def test_unconstrained_rows_are_unchanged_by_constrained_neighbours(tiny):
    engine, _, _ = tiny
    prompts = [[1, 2, 3], list(range(30)), [9, 10, 11, 12]]
    greedy = SamplingParams(temperature=0.0, max_tokens=10)
    alone = [engine.submit(p, greedy).collect().token_ids for p in prompts]
    constrained = SamplingParams(temperature=0.0, max_tokens=6, constraint=SPEC)
    streams = [engine.submit(p, greedy) for p in prompts] + [engine.submit([5, 6], constrained)]
    results = [s.collect() for s in streams]
    assert [r.token_ids for r in results[:3]] == alone
    assert results[3].token_ids == (7,) * 6


def test_batches_without_constraints_never_sync_for_masks(tiny, monkeypatch):
    engine, _, _ = tiny

    def forbidden(*args):
        raise AssertionError("an unconstrained batch must keep the pipeline as it is")

    monkeypatch.setattr(runner_module, "advance_all", forbidden)
    monkeypatch.setattr(runner_module, "constraint_masks", forbidden)
    streams = [engine.submit(p, SamplingParams(temperature=0.0, max_tokens=5)) for p in ([1, 2], [3, 4, 5])]
    assert all(s.collect().finish_reason is FinishReason.LENGTH for s in streams)
