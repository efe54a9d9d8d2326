"""`mlxctl run` end to end: the real entry point, the real SmolLM2 weights."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest


def test_default_model_answers_paris(cli):
    r = cli("run", "What is the capital of France?")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_prompt_from_stdin_composes_in_a_pipe(cli):
    r = cli("run", "--max-tokens", "12", input="What is the capital of France?\n")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    dash = cli("run", "-", "--max-tokens", "12", input="What is the capital of France?\n")
    assert dash.stdout == r.stdout


def test_json_output(cli):
    r = cli("run", "--json", "--max-tokens", "5", "--logprobs", "2", "What is the capital of France?")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["finish_reason"] == "length"
    assert doc["usage"]["completion_tokens"] == 5
    assert doc["timings"]["ttft_s"] > 0 and doc["timings"]["decode_tps"] > 0
    assert len(doc["logprobs"]) == 5 and len(doc["logprobs"][0]["top"]) == 2
    assert doc["text"].startswith("The capital")


def test_verbose_prints_stats_on_stderr_only(cli):
    r = cli("run", "-v", "--max-tokens", "4", "Hi")
    assert r.returncode == 0, r.stderr
    assert "tok/s" in r.stderr and "tok/s" not in r.stdout


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_raw_and_system_prompt(cli):
    r = cli("run", "--raw", "--max-tokens", "6", "The capital of France is")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    s = cli("run", "--system", "Answer in one word.", "--max-tokens", "6", "What is the capital of France?")
    assert s.returncode == 0 and "Paris" in s.stdout


def test_stop_string_is_not_printed(cli):
    r = cli("run", "--stop", "France", "What is the capital of France?")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "The capital of"


def one_line_error(r, code, needle):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout == ""


def test_unknown_model_is_a_one_line_error(cli):
    one_line_error(cli("run", "--model", "no-such-model-xyz", "hi"), 3, "no-such-model-xyz")


def test_empty_prompt_is_refused(cli):
    one_line_error(cli("run", input="   \n"), 4, "empty")


def test_prompt_over_the_context_is_refused_not_truncated(cli):
    r = cli("run", "--raw", input="word " * 9000)
    one_line_error(r, 4, "context")


def test_bad_sampling_value_is_a_usage_error(cli):
    r = cli("run", "--temperature", "5", "hi")
    assert r.returncode == 2 and "temperature" in r.stderr


def test_ctrl_c_stops_cleanly(model_home, smollm2):
    env = dict(os.environ, MLXCTL_HOME=str(model_home))
    # a terminal's Ctrl-C reaches a process whose SIGINT is not ignored; a test run started in
    # the background by a shell without job control inherits it ignored, and so would the child
    proc = subprocess.Popen([sys.executable, "-m", "mlxctl", "run", "--ignore-eos", "--max-tokens", "2000",
                             "Count from one to one thousand."], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stdout.read(1)  # generation has started: the signal lands while it streams
    assert first
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "Traceback" not in err


def test_dummy_weights_run_a_preset_with_the_real_tokenizer(cli):
    r = cli("run", "--load-format", "dummy", "-m", "smollm2-135m", "--ignore-eos", "-n", "4", "--json", "hi")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"] == "dummy-smollm2-135m" and doc["usage"]["completion_tokens"] == 4


def test_dummy_weights_reject_an_unknown_preset(cli):
    one_line_error(cli("run", "--load-format", "dummy", "-m", "no-such-preset", "hi"), 4, "no-such-preset")


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_logit_bias_and_stop_token_ids_reach_the_sampler(cli):
    forced = cli("run", "--json", "--raw", "--max-tokens", "3", "--logit-bias", "28=100", "The capital of France is")
    assert forced.returncode == 0, forced.stderr
    doc = json.loads(forced.stdout)
    assert doc["usage"]["completion_tokens"] == 3 and doc["finish_reason"] == "length"
    once = json.loads(cli("run", "--json", "--raw", "--max-tokens", "1", "--logit-bias", "28=100",
                          "The capital of France is").stdout)["text"]
    assert once and doc["text"] == once * 3  # token 28 every time
    stopped = cli("run", "--json", "--raw", "--max-tokens", "3", "--logit-bias", "28=100", "--stop-token-id", "28",
                  "The capital of France is")
    got = json.loads(stopped.stdout)
    assert got["finish_reason"] == "stop" and got["text"] == "" and got["usage"]["completion_tokens"] == 1


def test_bad_logit_bias_is_a_one_line_error(cli):
    one_line_error(cli("run", "--logit-bias", "28:5", "hi"), 4, "--logit-bias '28:5' is not ID=BIAS")
    one_line_error(cli("run", "--logit-bias", "28=500", "hi"), 4, "logit_bias")
