"""Structured-output constraints on their own: compiling (errors are BadInputError with
llguidance's reason), the masks a matcher gives with the real SmolLM2 tokenizer, EOS and
completion, activate_after, and masked sampling."""

from __future__ import annotations

import json
import math
import re

import mlx.core as mx
import numpy as np
import pytest

from mlxctl.engine.constraints import (
    ConstraintSpec,
    compile_constraint,
    constraint_masks,
    ll_tokenizer,
)
from mlxctl.engine.sampling import (
    MASKED_LOGPROB,
    SamplingParams,
    TokenSampler,
    sample_batch,
)
from mlxctl.errors import BadInputError
from tests.engine.tiny import CharTokenizer

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def tok(smollm2):
    """mlx-lm's TokenizerWrapper of SmolLM2 (what LoadedModel.tokenizer is)."""
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    return load_tokenizer(smollm2.path)


@pytest.fixture(scope="module")
def width(tok):
    return len(tok._tokenizer)  # SmolLM2's logits are as wide as its vocabulary (49152)


def ids(tok, text: str) -> list[int]:
    return tok._tokenizer.encode(text, add_special_tokens=False)


def allowed(matcher) -> list[int]:
    mask = matcher.mask()
    assert mask is not None and mask.dtype == mx.bool_
    return np.nonzero(np.array(mask))[0].tolist()


def texts(tok, token_ids: list[int]) -> list[str]:
    return [tok._tokenizer.decode([t]) for t in token_ids]


# --- compiling ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (ConstraintSpec("regex", "a(b"), "unclosed group"),
        (ConstraintSpec("lark", "start: foo"), 'unknown name: "foo"'),
        (ConstraintSpec("json_schema", "{not json"), "not valid JSON"),
        (ConstraintSpec("json_schema", "[1, 2]"), "expected an object"),
        (ConstraintSpec("json_schema", '{"type": 12}'), "type must be a string"),
        (ConstraintSpec("json_schema", '{"type": "string", "format": "nope"}'), "Unknown format: nope"),
        (ConstraintSpec("regex", "  "), "empty regex"),
        (ConstraintSpec("yaml", "a: 1"), "constraint kind must be one of"),  # type: ignore[arg-type]
        (ConstraintSpec("json_object", activate_after=""), "activate_after"),
    ],
)
def test_invalid_constraints_are_bad_input_with_the_reason(tok, spec, reason):
    with pytest.raises(BadInputError) as info:
        compile_constraint(spec, tok)
    message = str(info.value)
    assert reason in message
    assert "\n" not in message and "^" not in message


def test_lenient_schema_ignores_unknown_keywords(tok):
    schema = json.dumps({"type": "string", "format": "nope"})
    compiled = compile_constraint(ConstraintSpec("json_schema", schema, strict=False), tok)
    assert any("nope" in w for w in compiled.warnings)


def test_spec_shape_is_checked_by_sampling_params_validate():
    with pytest.raises(BadInputError, match="empty JSON schema"):
        SamplingParams(constraint=ConstraintSpec("json_schema", "")).validate()
    with pytest.raises(BadInputError, match="ConstraintSpec"):
        SamplingParams(constraint={"type": "json_object"}).validate()  # type: ignore[arg-type]
    SamplingParams(constraint=ConstraintSpec("json_object")).validate()


def test_a_tokenizer_llguidance_cannot_use_is_bad_input():
    with pytest.raises(BadInputError, match="fast Hugging Face tokenizer"):
        compile_constraint(ConstraintSpec("json_object"), CharTokenizer())


def test_tokenizer_and_grammars_are_cached(tok):
    assert ll_tokenizer(tok) is ll_tokenizer(tok)
    a = compile_constraint(ConstraintSpec("regex", "[ab]+"), tok)
    b = compile_constraint(ConstraintSpec("regex", "[ab]+", activate_after="</think>"), tok)
    assert a.grammar is b.grammar  # activate_after does not change the grammar
    assert a.spec != b.spec


# --- masks ----------------------------------------------------------------------------------


def test_regex_mask_allows_only_grammar_tokens_then_only_eos(tok, width):
    m = compile_constraint(ConstraintSpec("regex", r"\d{3}-\d{4}"), tok).matcher(width)
    first = allowed(m)
    assert first and all(re.fullmatch(r"\d{1,3}", s) for s in texts(tok, first))
    for t in ids(tok, "555-123"):
        assert t in allowed(m)
        m.advance(t)
    assert not m.is_accepting() and not m.done
    assert all(re.fullmatch(r"\d", s) for s in texts(tok, allowed(m)))
    m.advance(ids(tok, "4")[0])
    assert m.done and m.is_accepting() and m.is_stopped() and m.error is None
    assert allowed(m) == sorted(tok.eos_token_ids)  # complete: only EOS may follow


def test_json_object_mask(tok, width):
    m = compile_constraint(ConstraintSpec("json_object"), tok).matcher(width)
    assert all(s.lstrip().startswith("{") or not s.strip() for s in texts(tok, allowed(m)))
    assert ids(tok, "[")[0] not in allowed(m)
    for t in ids(tok, '{"a": [1, {"b": null}]}'):
        assert t in allowed(m)
        m.advance(t)
    assert m.done


def test_json_schema_mask_follows_the_schema(tok, width):
    m = compile_constraint(ConstraintSpec("json_schema", json.dumps(PERSON)), tok).matcher(width)
    for t in ids(tok, '{"name": "Bob", "age": '):
        assert t in allowed(m)
        m.advance(t)
    now = set(allowed(m))
    assert ids(tok, "3")[0] in now
    assert ids(tok, '"')[0] not in now  # age is an integer
    for t in ids(tok, "30}"):
        m.advance(t)
    assert m.done and not m.rejected


def test_whitespace_between_json_tokens_is_bounded(tok, width):
    m = compile_constraint(ConstraintSpec("json_object"), tok).matcher(width)
    newline = ids(tok, "\n")[0]
    steps = 0
    while newline in allowed(m):
        m.advance(newline)
        steps += 1
        assert steps < 100, "unbounded whitespace lets a model loop forever"
    assert m.error is None


def test_a_token_outside_the_grammar_is_rejected_with_a_reason(tok, width):
    m = compile_constraint(ConstraintSpec("regex", "abc"), tok).matcher(width)
    m.advance(ids(tok, "x")[0])
    assert m.rejected and "structured output failed" in m.error
    m2 = compile_constraint(ConstraintSpec("regex", "abc"), tok).matcher(width)
    assert m2.error is None and not m2.rejected  # matchers never share state


def test_mask_is_padded_to_the_logits_width(tok, width):
    m = compile_constraint(ConstraintSpec("regex", r"\d+"), tok).matcher(width + 100)
    mask = np.array(m.mask())
    assert mask.shape == (width + 100,) and not mask[width:].any()
    narrow = compile_constraint(ConstraintSpec("regex", r"\d+"), tok).matcher(width - 1)
    assert np.array(narrow.mask()).shape == (width - 1,)


def test_batch_masks_leave_unconstrained_rows_free(tok, width):
    c = compile_constraint(ConstraintSpec("regex", "[0-9]"), tok)
    a, b = c.matcher(width), c.matcher(width)
    assert constraint_masks([None, None], width) is None
    masks = constraint_masks([a, None, b], width)
    assert masks[1] is None
    assert np.array_equal(np.array(masks[0]), np.array(masks[2]))


# --- activate_after -----------------------------------------------------------------------


def test_activate_after_leaves_reasoning_free_then_constrains(tok, width):
    spec = ConstraintSpec("regex", r"\d{3}", activate_after="</think>")
    m = compile_constraint(spec, tok).matcher(width)
    assert m.mask() is None
    reasoning = ids(tok, "<think>Let me count: one two</think>")
    assert texts(tok, reasoning[-3:]) == ["</", "think", ">"]  # the marker spans three tokens
    for t in reasoning[:-1]:
        m.advance(t)
        assert m.mask() is None and not m.active
    m.advance(reasoning[-1])
    assert m.active
    newline = ids(tok, "\n")[0]
    after = allowed(m)
    assert newline in after  # whitespace after the marker stays free...
    assert all(re.fullmatch(r"\d{1,3}", s) or not s.strip() for s in texts(tok, after))
    m.advance(newline)
    m.advance(ids(tok, "1")[0])
    assert newline not in allowed(m)  # ...until the output starts
    assert all(re.fullmatch(r"\d{1,2}", s) for s in texts(tok, allowed(m)))


def test_leading_whitespace_after_the_marker_is_bounded(tok, width):
    m = compile_constraint(ConstraintSpec("regex", "[0-9]", activate_after="A:"), tok).matcher(width)
    for t in ids(tok, "A:"):
        m.advance(t)
    newline = ids(tok, "\n")[0]
    steps = 0
    while newline in allowed(m):
        m.advance(newline)
        steps += 1
        assert steps < 100
    assert m.error is None and m.consumed == 0


def test_text_after_the_marker_in_the_same_token_counts(tok, width):
    spec = ConstraintSpec("json_object", activate_after="x=")
    m = compile_constraint(spec, tok).matcher(width)
    tokens = ids(tok, 'x={"a":1}')
    assert texts(tok, tokens[:2]) == ["x", '={"']
    for t in tokens[:2]:
        m.advance(t)
    assert m.active and m.error is None and m.consumed == 1
    for t in tokens[2:]:
        assert t in allowed(m)
        m.advance(t)
    assert m.done

    bad = compile_constraint(ConstraintSpec("json_object", activate_after="Ans"), tok).matcher(width)
    for t in ids(tok, "Answer"):
        bad.advance(t)
    assert bad.rejected and "does not start a valid JSON object" in bad.error


# --- masked sampling ----------------------------------------------------------------------


def test_mask_applies_before_bias_and_logprobs_reflect_it():
    logits = mx.array([5.0, 4.0, 3.0, 2.0])
    mask = mx.array([False, False, True, True])
    sampler = TokenSampler(SamplingParams(temperature=0.0, logprobs=True, top_logprobs=4,
                                          logit_bias={0: 10.0}), 4, [])
    out = sampler.sample(logits, mask)
    assert out.token.item() == 2
    probs = np.exp(np.array([3.0, 2.0]) - np.logaddexp(3.0, 2.0))
    assert math.isclose(out.logprobs.logprob.item(), math.log(probs[0]), rel_tol=1e-5)
    top = out.logprobs.top_logprobs.tolist()
    assert top[2:] == [MASKED_LOGPROB, MASKED_LOGPROB]  # finite: JSON has no -inf


def test_sampled_rows_only_draw_allowed_tokens():
    logits = mx.zeros((2, 16))
    mask = mx.arange(16) % 5 == 0
    samplers = [TokenSampler(SamplingParams(temperature=1.0, seed=i), 16, []) for i in range(2)]
    seen = set()
    for _ in range(50):
        out = sample_batch(logits, samplers, [mask, None])
        seen.add(out.tokens[0].item())
    assert seen <= {0, 5, 10, 15} and len(seen) > 1


def test_unmasked_greedy_batch_keeps_the_argmax_fast_path():
    samplers = [TokenSampler(SamplingParams(temperature=0.0), 4, []) for _ in range(2)]
    out = sample_batch(mx.array([[0.0, 1.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]]), samplers, [None, None])
    assert out.tokens.tolist() == [1, 0] and out.state == []


def test_a_dead_end_sets_an_error_and_the_next_token_is_rejected(tok):
    # every digit token lies past a 16-wide logits row, so nothing is allowed
    m = compile_constraint(ConstraintSpec("regex", "[0-9]+"), tok).matcher(16)
    assert constraint_masks([m], 16) is None  # the row samples freely; its token is discarded
    assert "dead end" in m.error and not m.rejected
    m.advance(3)
    assert m.rejected


def test_a_token_sampled_past_a_dead_end_without_a_mask_fails_as_a_plain_step_does(tok):
    """A speculative check samples a position past a dead end freely (its draft masks allow every
    token there): the error names the dead end, word for word as a plain step's mask does."""
    spec = ConstraintSpec("regex", "[0-9]+")
    plain, checked = (compile_constraint(spec, tok).matcher(16) for _ in range(2))
    assert constraint_masks([plain], 16) is None
    plain.advance(3)
    checked.advance(3)  # no mask was asked for
    assert checked.rejected and checked.error == plain.error and "dead end" in checked.error
    # a token refused where others were allowed is still named as refused
    m = compile_constraint(ConstraintSpec("regex", "(ab)+c"), tok).matcher(tok.vocab_size)
    m.advance(ids(tok, "c")[0])
    assert m.rejected and "does not continue the" in m.error and "dead end" not in m.error


def test_draft_masks_are_the_masks_plain_steps_give_and_leave_the_matcher_as_it_was(tok, width):
    """Speculative decoding's masks: one per drafted position, each what a plain step gives after
    the tokens before it; past a token the grammar refuses every token is allowed (never reached)."""
    compiled = compile_constraint(ConstraintSpec("regex", "(ab)+c"), tok)
    a, b, c = (ids(tok, x)[0] for x in ("a", "b", "c"))
    draft = [a, b, a, b, c, a]  # the last "a" is refused after "ababc"
    words = (width + 31) // 32
    plain, one_by_one = compiled.matcher(width), []
    for token in draft[:5]:
        plain.advance(token)
        row = np.zeros(words, dtype=np.int32)
        plain.fill_bitmask(row)
        one_by_one.append(row)
    drafting = compiled.matcher(width)
    out = np.zeros((len(draft), words), dtype=np.int32)
    drafting.draft_bitmasks(draft, out)
    for j in range(5):
        assert (out[j] == one_by_one[j]).all(), j
    assert (out[5] != 0).all()  # after the refused token: everything
    assert drafting.consumed == 0  # left where it was: it gives a fresh matcher's mask
    fresh, again = np.zeros(words, dtype=np.int32), np.zeros(words, dtype=np.int32)
    compiled.matcher(width).fill_bitmask(fresh)
    drafting.fill_bitmask(again)
    assert (fresh == again).all() and not (fresh == one_by_one[0]).all()
