"""`serve --default-temperature / --default-top-p / --default-top-k / --default-max-tokens`: a bad
value is refused in one line, exit 4, before a model is looked for; a good one reaches the
settings. Values a generation_config.json gets wrong are left out, never a request's error."""

from __future__ import annotations

import pytest

from mlxctl.api.sampling_defaults import SamplingDefaults, from_generation_config
from mlxctl.cli.serve_sampling import sampling_defaults
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli


@pytest.mark.parametrize("flag, value, message", [
    ("--default-temperature", "3", "--default-temperature must be between 0 and 2, got 3.0"),
    ("--default-temperature", "warm", "--default-temperature must be a number, got 'warm'"),
    ("--default-temperature", "nan", "--default-temperature must be a number, got 'nan'"),
    ("--default-top-p", "0", "--default-top-p must be greater than 0 and at most 1, got 0.0"),
    ("--default-top-k", "-1", "--default-top-k must be at least 0 (0 turns it off), got -1"),
    ("--default-top-k", "1.5", "--default-top-k must be a whole number, got '1.5'"),
    ("--default-max-tokens", "0", "--default-max-tokens must be at least 1, got 0"),
    ("--default-max-tokens", "many", "--default-max-tokens must be a whole number, got 'many'"),
])
def test_a_bad_default_is_one_line_and_exit_bad_input(flag, value, message):
    result = run_cli("serve", flag, value, "--model", "/no/such/model")
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == [f"mlxctl: error: {message}"]


def test_good_defaults_are_read():
    assert sampling_defaults("0.7", "0.95", "40", "4096") == SamplingDefaults(0.7, 0.95, 40, None, None, 4096)
    assert sampling_defaults(None, None, None, None) == SamplingDefaults()


def test_a_generation_config_value_out_of_range_or_of_the_wrong_type_is_left_out():
    found = from_generation_config({"temperature": 5, "top_p": "0.9", "top_k": -1, "min_p": 0.1,
                                    "repetition_penalty": True})
    assert found == SamplingDefaults(min_p=0.1)
