"""`mlxctl model convert` and `mlxctl model qualify` as users run them: output modes, exit
statuses, one-line errors."""

from __future__ import annotations

import io
import json
import shutil
import struct

import pytest
import typer

from mlxctl.cli.app import app
from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli
from tests.models.helpers import write_tiny_gguf
from tests.models.test_convert import write_hf_llama

SMALL = dict(determinism=8, call=64, answer=8, json=48, speed=8)


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """An empty store and HF cache, offline; the same for in-process and subprocess runs."""
    env = {"MLXCTL_HOME": str(tmp_path / "home"), "HF_HOME": str(tmp_path / "hf"),
           "HF_HUB_OFFLINE": "1", "MLXCTL_OFFLINE": ""}  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return env


@pytest.fixture
def short_answers(monkeypatch):
    from mlxctl.models import qualify

    monkeypatch.setattr(qualify, "DEFAULT_BUDGET", qualify.Budget(**SMALL))


def mlxctl(*args: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (status, stdout, stderr)."""
    state = CliState(debug=False, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO())
    status = invoke(typer.main.get_command(app), list(args), state)
    return status, state.stdout.getvalue(), state.stderr.getvalue()


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory, smollm2):
    return write_hf_llama(tmp_path_factory.mktemp("cli-hf") / "tiny-llama", smollm2.path)


# --- convert ------------------------------------------------------------------------------------


def test_convert_json_then_quiet_then_human(homes, hf_folder):
    status, out, err = mlxctl("model", "convert", str(hf_folder), "--quantize", "4", "--json")
    assert status == ExitStatus.OK, err
    result = json.loads(out)
    assert result["name"] == "tiny-llama-4bit" and result["converted"] is True
    assert result["manifest"]["recipe"]["bits"] == 4 and result["size_bytes"] > 0
    status, out, err = mlxctl("model", "convert", str(hf_folder), "--quantize", "4", "--quiet")
    assert status == ExitStatus.OK and out.strip() == result["path"] and err == ""
    status, out, _ = mlxctl("model", "convert", str(hf_folder), "--recipe", "mixed_3_6",
                            "--group-size", "128", "--name", "mixed")  # fmt: skip
    assert status == ExitStatus.OK
    first, path = out.splitlines()
    assert first.startswith("mixed: converted (mixed_3_6, float32, ") and "bits per weight" in first
    status, out, _ = mlxctl("model", "list", "--quiet")
    assert out.split() == ["mixed", "tiny-llama-4bit"]


def test_convert_gguf(homes, tmp_path):
    path, _, _ = write_tiny_gguf(tmp_path / "tiny.gguf")
    status, out, err = mlxctl("model", "convert", str(path), "--json")
    assert status == ExitStatus.OK, err
    assert json.loads(out)["manifest"]["recipe"]["method"] == "gguf-llama"


def _unread_type(path) -> None:
    data = bytearray(path.read_bytes())
    name = b"blk.1.attn_q.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    (dims,) = struct.unpack_from("<I", data, at)
    struct.pack_into("<I", data, at + 4 + 8 * dims, 16)  # IQ2_XXS
    path.write_bytes(bytes(data))


def test_convert_errors_are_one_line(homes, tmp_path, hf_folder):
    gguf, _, _ = write_tiny_gguf(tmp_path / "k.gguf")
    _unread_type(gguf)
    odd = tmp_path / "odd"
    shutil.copytree(hf_folder, odd)
    (odd / "config.json").write_text(json.dumps({"model_type": "whatever"}))
    (tmp_path / "empty").mkdir()
    cases = [
        ([str(gguf)], ExitStatus.BAD_INPUT, "tensor type IQ2_XXS is not supported"),
        ([str(odd)], ExitStatus.BAD_INPUT, "architecture 'whatever' (unknown architecture) is not supported"),
        ([str(tmp_path / "empty")], ExitStatus.BAD_INPUT, "is not a model to convert"),
        ([str(tmp_path / "missing")], ExitStatus.NOT_FOUND, "no such file or folder"),
        (["org/not-cached"], ExitStatus.NOT_FOUND, "is not in the local Hugging Face cache"),
        ([str(hf_folder), "--group-size", "64"], ExitStatus.BAD_INPUT, "--group-size applies only"),
    ]  # fmt: skip
    for args, expected, text in cases:
        status, out, err = mlxctl("model", "convert", *args)
        assert (status, out) == (expected, ""), (args, err)
        assert err.startswith("mlxctl: error: ") and text in err.splitlines()[0], err
    result = run_cli("model", "convert", str(gguf), env=homes)  # the real entry point
    assert result.returncode == ExitStatus.BAD_INPUT and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Q4_K, Q5_K, Q6_K" in result.stderr
    result = run_cli("model", "convert", str(hf_folder), "--quantize", "5", env=homes)
    assert result.returncode == ExitStatus.USAGE


# --- qualify ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_url(smollm2_engine):
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    server = BackgroundServer(init_app(smollm2_engine, ServeSettings(model_name="smollm2-135m"))).start()
    yield server.url
    server.stop()


def test_qualify_failing_model_exits_7_with_the_scorecard(homes, short_answers, tmp_path, smollm2):
    folder = tmp_path / "bare"
    shutil.copytree(smollm2.path, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    status, out, err = mlxctl("model", "qualify", str(folder), "--json")
    assert status == ExitStatus.CHECK_FAILED
    card = json.loads(out)
    assert card["passed"] is False and card["target"] == "in-process"
    assert [c["status"] for c in card["checks"]] == ["pass", "fail", "skip", "skip", "skip", "pass"]
    assert err.splitlines() == ["mlxctl: error: smollm2-135m failed 1 of 6 checks: chat_template"]


@pytest.mark.slow
def test_qualify_url_passes(homes, short_answers, server_url):
    status, out, err = mlxctl("model", "qualify", "--url", server_url)
    assert status == ExitStatus.OK, out + err
    lines = out.splitlines()
    assert lines[0] == f"smollm2-135m ({server_url}): qualifies"
    assert [line.split()[0] for line in lines[1:7]] == ["loads", "chat", "deterministic", "tool", "json", "speed"]
    assert "TTFT" in lines[-1] and "peak memory" in lines[-1]


def test_qualify_url_errors(homes, short_answers, server_url):
    status, out, err = mlxctl("model", "qualify", "other", "--url", server_url, "--json")
    assert status == ExitStatus.CHECK_FAILED and json.loads(out)["checks"][0]["status"] == "fail"
    assert err.strip() == "mlxctl: error: other failed 1 of 6 checks: loads"
    from mlxctl.server.runner import free_port

    status, out, err = mlxctl("model", "qualify", "--url", f"http://127.0.0.1:{free_port()}")
    assert status == ExitStatus.UNAVAILABLE and out == "" and err.startswith("mlxctl: error: cannot qualify")
    status, _, err = mlxctl("model", "qualify")
    assert status == ExitStatus.BAD_INPUT and "give a MODEL to load, or --url" in err
