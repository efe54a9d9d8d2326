"""Convert on acquire: a model that is not in MLX format (Hugging Face safetensors in the HF cache
or a folder, a GGUF file, a faster-whisper folder) is converted into the store by the converters
of ``mlxctl model convert``; an MLX model is linked; ``convert=False`` keeps the files as fetched.
Real files and real conversions, no network (HF_HUB_OFFLINE=1, see conftest)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
import typer

from mlxctl.errors import BadInputError, ExitStatus, ModelFormatError, UnavailableError
from mlxctl.models.acquire import acquire, list_models, remove
from mlxctl.models.digest import file_sha256
from mlxctl.models.manifest import read_manifest
from mlxctl.models.store import ModelStore
from tests.models.test_convert import _generates, hf_llama  # noqa: F401  (hf_llama: a fixture)
from tests.models.test_inspect import fake_hf_snapshot

REPO = "org/tiny-llama"


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "store")


@pytest.fixture
def cached_repo(hf_llama):  # noqa: F811
    """The tiny Hugging Face-layout llama as a snapshot of org/tiny-llama in the fake HF cache."""
    files = {p.name: p.read_bytes() for p in hf_llama.iterdir()}
    return fake_hf_snapshot(Path(os.environ["HF_HOME"]), REPO, files)


def _leftovers(store: ModelStore) -> list[str]:
    return sorted(p.name for p in store.models_dir.iterdir() if p.name.startswith("."))


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


# --- Hugging Face -------------------------------------------------------------------------


def test_hf_safetensors_repo_in_the_cache_converts_offline(store, cached_repo):
    messages: list[str] = []
    got = acquire(REPO, store=store, progress=messages.append)
    assert got.name == "org--tiny-llama" and got.fetched and got.converted
    m = read_manifest(got.path)
    assert m == got.manifest
    assert (m["source"], m["source_type"], m["format"], m["kind"]) == (f"hf:{REPO}", "hf", "mlx", "chat")
    assert m["revision"] == cached_repo.name and m["path"] == str(cached_repo)
    assert m["stored"] == "converted" and "requested_revision" not in m
    assert m["convert_options"] == {"quantize": None, "group_size": None, "recipe": None, "dtype": None}
    recipe = m["recipe"]
    assert (recipe["method"], recipe["source"], recipe["quantize"], recipe["bits"]) == ("mlx-lm", f"hf:{REPO}", "none", None)
    assert recipe["dtype"] == "float32" and recipe["mlx_lm"]
    # the source's hashes (LFS: from the blob names) and the converted files' own
    assert m["source_files"]["model.safetensors"] == file_sha256(cached_repo / "model.safetensors")
    assert set(m["source_files"]) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    for rel, sha in m["files"].items():
        assert not (got.path / rel).is_symlink() and sha == file_sha256(got.path / rel)
    assert "model.safetensors" in m["files"]
    # progress on stderr names the repo, not the snapshot's commit folder
    assert any(f"{REPO}@{cached_repo.name[:12]} is not in MLX format" in line for line in messages)
    assert any(line.startswith(f"converting {REPO}@") for line in messages)
    assert not any(cached_repo.name in line for line in messages)
    assert len(_generates(got.path)) == 4  # mlx-lm loads it and generates
    # the HF cache keeps its own files; acquiring again is a no-op
    assert (cached_repo / "model.safetensors").is_symlink()
    again = acquire(REPO, store=store)
    assert not again.fetched and not again.converted and again.path == got.path
    [row] = list_models(store)
    assert (row["format"], row["source_type"], row["kind"]) == ("mlx", "hf", "chat")
    done = remove(got.name, store)
    assert done["kept"] == str(cached_repo) and (cached_repo / "model.safetensors").is_file()
    assert _leftovers(store) == []


def test_hf_repo_quantized_on_acquire_then_kept_as_fetched(store, cached_repo):
    got = acquire(f"{REPO}@main", store=store, quantize="4", group_size=32)
    assert got.converted
    assert _config(got.path)["quantization"] == {"group_size": 32, "bits": 4, "mode": "affine"}
    recipe = got.manifest["recipe"]
    assert (recipe["quantize"], recipe["bits"], recipe["group_size"]) == ("4", 4, 32)
    assert got.manifest["requested_revision"] == "main"
    assert got.manifest["convert_options"] == {"quantize": "4", "group_size": 32, "recipe": None, "dtype": None}
    assert len(_generates(got.path)) == 4
    assert not acquire(REPO, store=store, quantize="4", group_size=32).fetched  # the same: no-op

    kept = acquire(REPO, store=store, convert=False)  # --no-convert: links, as before
    assert kept.fetched and not kept.converted
    m = kept.manifest
    assert (m["format"], m["stored"], m["recipe"], m["not_converted"]) == ("safetensors", "hf-cache", None, "--no-convert")
    assert all((kept.path / rel).is_symlink() for rel in m["files"])
    assert not acquire(REPO, store=store, convert=False).fetched
    assert _leftovers(store) == []


def test_mlx_repo_is_linked_without_conversion(store, tiny_model_dir):
    files = {p.name: p.read_bytes() for p in tiny_model_dir.iterdir() if p.name != "manifest.json"}
    snapshot = fake_hf_snapshot(Path(os.environ["HF_HOME"]), "org/tiny-mlx", files)
    messages: list[str] = []
    got = acquire("org/tiny-mlx", store=store, progress=messages.append)
    assert got.fetched and not got.converted
    m = got.manifest
    assert (m["format"], m["stored"], m["recipe"], m["path"]) == ("mlx", "hf-cache", None, str(snapshot))
    assert "not_converted" not in m and "convert_options" not in m
    assert all((got.path / rel).is_symlink() for rel in m["files"])
    assert not any("convert" in line for line in messages)
    # --quantize none changes nothing; --quantize 4 asks for a conversion of the MLX weights
    assert not acquire("org/tiny-mlx", store=store, quantize="none").fetched
    quantized = acquire("org/tiny-mlx", store=store, quantize="4", group_size=32, progress=messages.append)
    assert quantized.converted and _config(quantized.path)["quantization"]["bits"] == 4
    assert messages[0] == (f"org/tiny-mlx@{snapshot.name[:12]} is MLX already: converting it again (--quantize, "
                           "--group-size) into the store as org--tiny-mlx (the snapshot stays in the Hugging Face cache)")


# --- local files --------------------------------------------------------------------------


def test_local_gguf_is_converted(store, tiny_gguf):
    path, _, _ = tiny_gguf
    messages: list[str] = []
    got = acquire(str(path), store=store, progress=messages.append)
    assert got.name == "tiny" and got.fetched and got.converted
    m = got.manifest
    assert (m["format"], m["stored"], m["source_type"], m["kind"]) == ("mlx", "converted", "local", "chat")
    assert m["source"] == str(path.resolve()) == m["recipe"]["source"]
    assert m["source_sha256"] == file_sha256(path)
    assert m["recipe"]["method"] == "gguf-llama" and m["recipe"]["dtype"] == "float32"
    assert "config.json" in m["files"] and "tiny.gguf" not in m["files"]
    assert any("tiny.gguf is not in MLX format" in line for line in messages)
    assert len(_generates(got.path)) == 4
    assert path.is_file()  # the original stays
    assert not acquire(str(path), store=store).fetched

    raw = acquire(str(path), store=store, name="raw", convert=False)  # --no-convert: as is
    assert not raw.converted and raw.manifest["format"] == "gguf" and raw.manifest["recipe"] is None
    assert raw.manifest["files"] == {"tiny.gguf": file_sha256(path)}
    assert os.path.samefile(raw.path / "tiny.gguf", path)
    assert _leftovers(store) == []


def test_local_hf_folder_is_converted_with_the_options(store, hf_llama):  # noqa: F811
    got = acquire(str(hf_llama), store=store, recipe="mixed_4_6", dtype="bfloat16")
    assert got.name == "tiny-llama" and got.converted
    recipe = got.manifest["recipe"]
    assert (recipe["name"], recipe["bits"], recipe["high_bits"], recipe["dtype"]) == ("mixed_4_6", 4, 6, "bfloat16")
    assert got.manifest["source"] == str(hf_llama) and got.manifest["source_type"] == "local"
    # asked another way: rebuilt in place, the same source and name
    floats = acquire(str(hf_llama), store=store, dtype="float16")
    assert floats.fetched and floats.converted and floats.path == got.path
    assert floats.manifest["recipe"]["dtype"] == "float16" and "quantization" not in _config(floats.path)
    # an already quantized source is not quantized again
    four = acquire(str(hf_llama), store=store, name="four", quantize="4")
    with pytest.raises(BadInputError, match=r"already quantized \(4-bit\)"):
        acquire(str(four.path), store=store, name="eight", quantize="8")
    assert not store.has("eight")


def test_faster_whisper_folder_is_converted(store, tmp_path):
    from mlxctl.audio.whisper_convert import RECIPE, is_mlx_whisper
    from tests.audio.helpers import toy_faster_whisper

    folder = toy_faster_whisper(tmp_path / "toy-whisper")
    with pytest.raises(BadInputError, match="Whisper models are converted unquantized; leave out --quantize"):
        acquire(str(folder), store=store, quantize="4")
    with pytest.raises(BadInputError, match="--dtype for Whisper must be float16 or float32"):
        acquire(str(folder), store=store, dtype="bfloat16")
    got = acquire(str(folder), store=store, dtype="float32")
    assert got.name == "toy-whisper" and got.converted and is_mlx_whisper(got.path)
    m = got.manifest
    assert (m["kind"], m["format"], m["stored"]) == ("stt", "mlx", "converted")
    assert m["recipe"]["method"] == RECIPE and m["recipe"]["dtype"] == "float32"
    assert m["source"] == str(folder.resolve()) and m["source_sha256"] == file_sha256(folder / "model.bin")
    assert _leftovers(store) == []


def test_what_no_converter_takes_is_kept_with_the_reason(store, hf_llama, tmp_path):  # noqa: F811
    folder = tmp_path / "odd"
    shutil.copytree(hf_llama, folder)
    (folder / "config.json").write_text(json.dumps({**_config(hf_llama), "model_type": "no_such_arch",
                                                    "architectures": ["NoSuchModel"]}))  # fmt: skip
    messages: list[str] = []
    got = acquire(str(folder), store=store, progress=messages.append)
    assert not got.converted and got.manifest["format"] == "safetensors"
    assert got.manifest["stored"] == "linked" and "is not supported by mlx-lm" in got.manifest["not_converted"]
    line = messages[0]  # then "hashing N files"
    assert line.startswith("odd: not converted to MLX, stored as fetched: ") and "no_such_arch" in line
    with pytest.raises(ModelFormatError, match="is not supported by mlx-lm") as info:
        acquire(str(folder), store=store, name="odd4", quantize="4")
    assert "\n" not in info.value.message and info.value.hint is None


@pytest.mark.parametrize("kwargs,message", [
    ({"convert": False, "quantize": "4"}, "--no-convert keeps the files as fetched; leave out --quantize"),
    ({"quantize": "5"}, "--quantize must be one of"),
    ({"group_size": 32}, "--group-size applies only with --quantize or --recipe"),
    ({"dtype": "int8"}, "--dtype must be one of"),
])  # fmt: skip
def test_bad_options_are_refused_before_any_work(store, tiny_gguf, kwargs, message):
    with pytest.raises(BadInputError, match=message) as info:
        acquire(str(tiny_gguf[0]), store=store, **kwargs)
    assert "\n" not in info.value.message
    assert not store.models_dir.exists() or store.names() == []


def test_catalog_models_take_no_conversion_options(store):
    with pytest.raises(BadInputError, match="catalog model whisper-tiny-en is stored as shipped; leave out --quantize"):
        acquire("whisper-tiny-en", store=store, quantize="4")


# --- the command --------------------------------------------------------------------------


def _mlxctl(*args: str) -> tuple[int, str, str]:
    from mlxctl.cli.app import app
    from mlxctl.cli.context import CliState
    from mlxctl.cli.entry import invoke

    state = CliState(debug=False, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO())
    status = invoke(typer.main.get_command(app), list(args), state)
    return status, state.stdout.getvalue(), state.stderr.getvalue()


def test_cli_converts_and_refuses_in_one_line(cached_repo):
    status, out, err = _mlxctl("model", "acquire", REPO, "--quantize", "8", "--json")
    assert status == ExitStatus.OK, err
    result = json.loads(out)
    assert result["converted"] is True and result["fetched"] is True
    assert result["manifest"]["recipe"]["bits"] == 8 and result["manifest"]["revision"] == cached_repo.name
    assert "is not in MLX format" in err and "mlx-lm: " in err  # progress on stderr, never stdout
    status, out, _ = _mlxctl("model", "acquire", REPO, "--quantize", "8")
    assert status == ExitStatus.OK
    assert out.startswith("org--tiny-llama: already in the store (mlx, converted by mlx-lm, 8-bit, float32, ")
    status, out, err = _mlxctl("model", "acquire", REPO, "--no-convert", "--dtype", "float16")
    assert status == ExitStatus.BAD_INPUT and out == ""
    assert err.splitlines() == ["mlxctl: error: --no-convert keeps the files as fetched; leave out --dtype"]
    status, _, err = _mlxctl("model", "acquire", REPO, "--quantize", "5")
    assert status == ExitStatus.USAGE


# --- what run -m / serve -m then find ---------------------------------------------------------


def test_run_finds_the_converted_copy_and_store_names(store, cached_repo, tiny_gguf):
    from mlxctl.models.resolve import resolve_model

    got = acquire(REPO, store=store)
    by_repo = resolve_model(REPO, store=store)  # not the raw HF-layout snapshot
    assert (by_repo.path, by_repo.source) == (got.path.resolve(), "store")
    assert resolve_model(f"{REPO}@{cached_repo.name}", store=store).path == got.path.resolve()
    with pytest.raises(UnavailableError):  # another revision is not that copy (and is not cached)
        resolve_model(f"{REPO}@0000000", store=store)
    by_name = resolve_model(got.name, store=store)
    assert (by_name.name, by_name.path, by_name.source) == (got.name, got.path.resolve(), "store")
    raw = acquire(str(tiny_gguf[0]), store=store, name="raw", convert=False)
    imported = resolve_model("raw", store=store)  # a GGUF kept as is: imported on first use
    assert imported.source == "gguf" and (imported.path / "config.json").is_file()
    assert raw.path.resolve() != imported.path
