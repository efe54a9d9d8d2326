"""check_prompt: what a prompt and its max_tokens may take of the model's context."""

from __future__ import annotations

import pytest

from mlxctl.engine.limits import check_prompt
from mlxctl.errors import BadInputError, ContextOverflowError, ExitStatus


def test_a_requested_max_tokens_that_fits_is_kept():
    assert check_prompt(12, 100, 8192, "max_tokens") == 100
    assert check_prompt(12, 8180, 8192, "max_tokens") == 8180  # exactly the room left


def test_a_requested_max_tokens_over_the_context_is_refused_naming_the_field():
    with pytest.raises(ContextOverflowError) as info:
        check_prompt(12, 1_000_000_000_000, 8192, "max_tokens")
    err = info.value
    assert err.message == ("max_tokens is 1000000000000 but the prompt has 12 tokens and the model's context "
                           "is 8192: at most 8180 new tokens fit")
    assert err.param == "max_tokens" and err.code == "context_length_exceeded"
    assert (err.prompt_tokens, err.max_tokens, err.context_length) == (12, 1_000_000_000_000, 8192)
    assert isinstance(err, BadInputError) and err.exit_status is ExitStatus.BAD_INPUT and err.http_status == 400


@pytest.mark.parametrize("field", ["max_completion_tokens", "max_output_tokens", "--max-tokens/-n"])
def test_the_refusal_names_the_field_as_given(field):
    with pytest.raises(ContextOverflowError, match=f"^{field} is 8181 .* at most 8180 new tokens fit$") as info:
        check_prompt(12, 8181, 8192, field)  # one token over
    assert info.value.param == field


def test_a_default_max_tokens_is_capped_to_the_room_left():
    assert check_prompt(8000, 256, 8192) == 192
    assert check_prompt(12, 256, 8192) == 256


def test_no_max_tokens_means_up_to_the_context():
    assert check_prompt(12, None, 8192) == 8180
    assert check_prompt(12, None, 8192, "max_output_tokens") == 8180


def test_a_prompt_that_fills_the_context_is_refused_whatever_max_tokens():
    for max_tokens, field in ((None, None), (10, "max_tokens")):
        with pytest.raises(ContextOverflowError, match="the prompt has 8192 tokens but the model's context is 8192") as info:
            check_prompt(8192, max_tokens, 8192, field)
        assert info.value.max_tokens is None and info.value.code == "context_length_exceeded"


def test_an_empty_prompt_is_refused():
    with pytest.raises(BadInputError, match="empty") as info:
        check_prompt(0, 10, 8192, "max_tokens")
    assert not isinstance(info.value, ContextOverflowError) and info.value.param == "prompt"
