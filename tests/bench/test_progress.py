"""bench-serve's progress bar: runs and requests counted as they finish, drawn only on a terminal."""

from __future__ import annotations

import io

from mlxctl.bench.bench import run_bench
from mlxctl.bench.config import BenchConfig
from mlxctl.bench.progress import Bar
from tests.cli.helpers import run_cli


class Recorder:
    """The bar's interface, recording what it was told."""

    def __init__(self):
        self.planned, self.steps, self.ticks, self.runs = None, [], 0, 0

    def plan(self, measured_runs):
        self.planned = measured_runs

    def step(self, label, requests):
        self.steps.append((label, requests))

    def tick(self):
        self.ticks += 1

    def run_done(self):
        self.runs += 1


def config(url: str) -> BenchConfig:
    return BenchConfig(urls=(url,), prompt_tokens=(16,), output_tokens=(4,), concurrency=(1, 2), num_requests=3)


def test_every_request_and_run_is_counted(fake):
    bar = Recorder()
    report = run_bench(config(fake.url), bar=bar)
    sent = sum(requests for _, requests in bar.steps)
    assert bar.planned == len(report.runs) == bar.runs == 2
    assert bar.ticks == sent == sum(n for label, n in bar.steps if label.startswith("warm-up")) + 6
    assert [label.split()[0] for label, _ in bar.steps] == ["warm-up", "[1/2]", "warm-up", "[2/2]"]


def test_the_bar_draws_on_a_terminal_and_lines_go_above_it(fake):
    stream = io.StringIO()
    with Bar(stream, force_terminal=True) as bar:
        run_bench(config(fake.url), progress=bar.message, bar=bar)
    drawn = stream.getvalue()
    assert "measured runs" in drawn and "2/2" in drawn
    assert "[2/2]" in drawn and "ok" in drawn  # the per-run summary lines


def test_no_bar_and_no_escape_codes_when_stderr_is_not_a_terminal(fake):
    result = run_cli("bench-serve", "--url", fake.url, "--prompt-tokens", "16", "--output-tokens", "4", "-n", "2")
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stderr and "measured runs" not in result.stderr
