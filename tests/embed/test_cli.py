"""`mlxctl embed` on the real MiniLM: JSON lines, stdin, .npy/.jsonl files, errors."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import typer

from mlxctl.cli.app import app
from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli
from tests.embed.conftest import COSINE, SENTENCES


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(minilm, model_home, monkeypatch):
    """cli(*args, stdin=None) -> (status, stdout, stderr), in process, the test cache as the store."""
    monkeypatch.setenv("MLXCTL_HOME", str(model_home))

    def run(*args: str, stdin: str | None = None):
        state = CliState(stdin=io.StringIO(stdin) if stdin is not None else Tty(), stdout=io.StringIO(),
                         stderr=io.StringIO())
        status = invoke(typer.main.get_command(app), ["embed", *args], state)
        return status, state.stdout.getvalue(), state.stderr.getvalue()

    return run


def rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_json_lines_and_the_reference_cosine(cli):
    status, out, err = cli(*SENTENCES)
    assert status == 0, err
    lines = rows(out)
    assert [(r["index"], r["text"]) for r in lines] == list(enumerate(SENTENCES))
    a, b = (np.array(r["embedding"]) for r in lines)
    assert a.shape == (384,) and float(a @ b) == pytest.approx(COSINE, abs=0.01)


def test_stdin_lines(cli):
    status, out, err = cli(stdin=f"{SENTENCES[0]}\n\n{SENTENCES[1]}\nthird line\n")
    assert status == 0, err
    assert [r["text"] for r in rows(out)] == [*SENTENCES, "third line"]
    assert "skipped 1 blank line" in err
    status, dash, _ = cli("-", stdin=f"{SENTENCES[0]}\n")
    # equal up to float32 rounding: BLAS may sum in another order for another batch shape
    assert status == 0 and np.allclose(rows(dash)[0]["embedding"], rows(out)[0]["embedding"], atol=1e-5)


def test_output_files(cli, tmp_path):
    npy, jsonl = tmp_path / "x.npy", tmp_path / "x.jsonl"
    status, out, err = cli("one", "two", "three", "--output", str(npy))
    assert status == 0 and out == "" and "wrote 3 embeddings of 384 dimensions" in err
    matrix = np.load(npy)
    assert matrix.shape == (3, 384) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1, atol=1e-5)
    assert cli("one", "two", "three", "-o", str(jsonl))[0] == 0
    np.testing.assert_allclose([r["embedding"] for r in rows(jsonl.read_text())], matrix, atol=1e-6)
    status, _, err = cli("one", "-o", str(tmp_path / "x.txt"))
    assert status == ExitStatus.BAD_INPUT and "use a .npy or .jsonl" in err


def test_json_document_and_no_normalize(cli):
    status, out, _ = cli("--json", "--no-normalize", SENTENCES[0])
    doc = json.loads(out)
    assert status == 0 and doc["model"] == "minilm-l6" and doc["dimensions"] == 384 and doc["normalized"] is False
    assert abs(np.linalg.norm(doc["data"][0]["embedding"]) - 1) > 0.01


def test_overlong_text_errors_unless_truncated(cli):
    long = "word " * 300
    status, out, err = cli("short", long)
    assert status == ExitStatus.BAD_INPUT and out == ""
    assert err.startswith("mlxctl: error: input 1 has 302 tokens, more than the 256 that minilm-l6 takes")
    assert "--truncate" in err  # --truncate runs in test_real_pipe (OpenBLAS there: faster)


def test_usage_errors(cli):
    status, _, err = cli()
    assert status == ExitStatus.BAD_INPUT and "no text given" in err
    status, _, err = cli("-m", "smollm2-135m", "hi")
    assert status == ExitStatus.BAD_INPUT and "chat model, not an embedding model" in err
    status, _, err = cli("-m", "no-such-model", "hi")
    assert status == ExitStatus.NOT_FOUND and "unknown embedding model" in err
    status, _, err = cli("a", "")
    assert status == ExitStatus.BAD_INPUT and "text 1 is empty" in err


def test_real_pipe_with_truncate(minilm, model_home):
    long = "word " * 300
    result = run_cli("embed", "--truncate", input=f"hello\n{long}\n", env={"MLXCTL_HOME": str(model_home)})
    assert result.returncode == 0, result.stderr
    assert [r["text"] for r in rows(result.stdout)] == ["hello", long]
    assert "truncated input 1 from 302 to 256 tokens" in result.stderr
