"""MLXCTL_STEP_TRACE: one JSON line per engine step, and scripts/step_trace.py's sums of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mlxctl.engine.engine import Engine
from mlxctl.engine.sampling import SamplingParams
from tests.engine.tiny import tiny_loaded

ROOT = Path(__file__).resolve().parents[2]


def test_each_step_is_traced_and_the_script_sums_the_runs(tmp_path, monkeypatch):
    trace = tmp_path / "steps.jsonl"
    monkeypatch.setenv("MLXCTL_STEP_TRACE", str(trace))
    loaded = tiny_loaded()
    params = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)
    with Engine(lambda: loaded) as engine:
        streams = [engine.submit([1, 2, 3, 4, 5], params), engine.submit([7, 8, 9], params)]
        assert [len(s.collect().token_ids) for s in streams] == [6, 6]
    lines = [json.loads(line) for line in trace.read_text().splitlines()]  # written at shutdown
    assert set(lines[0]) == {"t", "dt", "idle", "rows", "prefill_tokens", "prefill_reqs", "joined", "emitted", "spec",
                             "width", "kv"}
    assert [s["width"] for s in lines] == [0] + [1] * (len(lines) - 1)  # a prompt step, then plain ones
    kv = [s["kv"] for s in lines if s["rows"] == 2]  # both rows decoding: 5 positions a row (3 + 2 padding), then more
    assert kv and all(b == a + 1 for a, b in zip(kv, kv[1:])) and kv[0] >= 5
    assert sum(s["emitted"] for s in lines) == 12
    assert sum(s["joined"] for s in lines) == 2
    assert sum(s["prefill_tokens"] for s in lines) == 8
    assert all(s["dt"] >= 0 and s["idle"] >= 0 for s in lines) and lines[0]["t"] == 0
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "step_trace.py"), str(trace), "--json", "--gap", "60"],
                         capture_output=True, text=True, check=True)
    (run,) = json.loads(out.stdout)
    assert run["steps"] == len(lines) and run["emitted"] == 12 and run["prompt_tokens"] == 8
    assert run["decode_steps"] + run["prompt_steps"] == len(lines)


def test_the_script_counts_the_steps_after_which_rows_left(tmp_path):
    """Decode-only steps after which fewer rows decode than decoded in them and joined in them
    (requests ended there), and a run's last step when it is decode-only; a step with prompt
    work never counts."""
    def step(t, dt, rows, prefill=0, joined=0):
        return {"t": t, "dt": dt, "idle": 0.0, "rows": rows, "prefill_tokens": prefill, "prefill_reqs": int(bool(prefill)),
                "joined": joined, "emitted": rows, "spec": False}
    steps = [step(0.0, 0.5, 0, prefill=40, joined=4), step(0.5, 0.01, 4), step(0.51, 0.03, 4),  # two leave after it, one joins
             step(0.54, 0.01, 2, prefill=10, joined=1), step(0.55, 0.02, 3), step(0.57, 0.04, 3)]  # the run ends
    trace = tmp_path / "steps.jsonl"
    trace.write_text("".join(json.dumps(s) + "\n" for s in steps))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "step_trace.py"), str(trace), "--json"],
                         capture_output=True, text=True, check=True)
    (run,) = json.loads(out.stdout)
    assert (run["leave_steps"], run["leave_ms_p50"], run["leave_s"]) == (2, 35.0, 0.07)
    assert run["decode_steps"] == 4 and run["prompt_steps"] == 2
    # pass shapes met for the first time: 4 rows, 3 rows (the decode-only steps' rows; no widths: 1)
    assert (run["first_shape_steps"], run["first_shape_s"]) == (2, 0.03)


def test_checks_trace_their_width_and_the_script_counts_shapes_met_first(tmp_path, monkeypatch):
    """A speculative step's ``width`` is its pass's (the pending token and the longest draft);
    the script counts a shape once over the whole trace, not once a run."""
    from mlxctl.engine.engine import EngineConfig
    from mlxctl.engine.speculative import SpeculationConfig

    trace = tmp_path / "steps.jsonl"
    monkeypatch.setenv("MLXCTL_STEP_TRACE", str(trace))
    loaded = tiny_loaded()
    params = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True, num_draft_tokens=3)
    config = EngineConfig(speculation=SpeculationConfig("ngram", 3, measured=False))
    with Engine(lambda: loaded, config) as engine:
        engine.submit([5, 6, 7] * 8, params).collect()  # a prompt that repeats: drafts found
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    checks = [s for s in lines if s["spec"] and s["width"] > 1]
    assert checks and all(2 <= s["width"] <= 4 for s in checks)
    doubled = tmp_path / "twice.jsonl"  # the same steps twice, far apart: the second run meets no new shape
    again = [dict(s, t=s["t"] + 100, idle=100.0 if i == 0 else s["idle"]) for i, s in enumerate(lines)]
    doubled.write_text("".join(json.dumps(s) + "\n" for s in lines + again))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "step_trace.py"), str(doubled), "--json"],
                         capture_output=True, text=True, check=True)
    first, second = json.loads(out.stdout)
    shapes = {(s["rows"], s["width"]) for s in lines if not s["prefill_tokens"]}
    assert first["first_shape_steps"] == len(shapes) and second["first_shape_steps"] == 0


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("MLXCTL_STEP_TRACE", raising=False)
    monkeypatch.chdir(tmp_path)
    loaded = tiny_loaded()
    with Engine(lambda: loaded) as engine:
        assert engine.trace is None
        engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=2)).collect()
    assert list(tmp_path.iterdir()) == []


def test_a_trace_that_cannot_be_written_stops_with_a_warning_and_the_engine_serves_on(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MLXCTL_STEP_TRACE", str(tmp_path))  # a directory: no file can be opened there
    monkeypatch.setattr("mlxctl.engine.step_trace.FLUSH_EVERY", 2)  # written (and failing) mid-run
    loaded = tiny_loaded()
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    with caplog.at_level("WARNING", logger="mlxctl.engine"):
        with Engine(lambda: loaded) as engine:
            assert len(engine.submit([1, 2, 3], params).collect().token_ids) == 8
            assert len(engine.submit([4, 5], params).collect().token_ids) == 8
    warnings = [r.getMessage() for r in caplog.records if "step trace stops" in r.getMessage()]
    assert len(warnings) == 1 and str(tmp_path) in warnings[0]


def test_the_script_names_a_file_it_cannot_read(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "step_trace.py"), str(tmp_path / "none.jsonl")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "none.jsonl" in out.stderr
