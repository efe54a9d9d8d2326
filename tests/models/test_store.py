from pathlib import Path

import pytest

from mlxctl.models.store import ModelStore, mlxctl_home


def test_home_prefers_mlxctl_home(monkeypatch, tmp_path):
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert mlxctl_home() == tmp_path / "a"


def test_home_falls_back_to_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("MLXCTL_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert mlxctl_home() == tmp_path / "x" / "mlxctl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert mlxctl_home() == tmp_path / "h" / ".cache" / "mlxctl"


def test_store_defaults_to_home(tmp_path):
    store = ModelStore()
    assert store.models_dir == tmp_path / "mlxctl-home" / "models"
    assert store.wheels_dir == tmp_path / "mlxctl-home" / "wheels"


def _write_model(out: Path) -> None:
    (out / "config.json").write_text("{}")


def test_install_builds_once(tmp_path):
    store = ModelStore(tmp_path / "s")
    calls = []
    build = lambda out: (calls.append(out), _write_model(out))  # noqa: E731
    first = store.install("m", build)
    second = store.install("m", build)
    assert first == second == store.model_path("m")
    assert (first / "config.json").is_file()
    assert len(calls) == 1
    assert store.names() == ["m"]


def test_failed_build_leaves_nothing(tmp_path):
    store = ModelStore(tmp_path / "s")

    def broken(out: Path) -> None:
        _write_model(out)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.install("m", broken)
    assert not store.has("m")
    assert list(store.models_dir.iterdir()) == []


def test_names_skip_partial_folders(tmp_path):
    store = ModelStore(tmp_path / "s")
    (store.models_dir / ".partial-m-123").mkdir(parents=True)
    assert store.names() == []


def test_lost_race_keeps_the_winner(tmp_path):
    store = ModelStore(tmp_path / "s")

    def racing(out: Path) -> None:
        _write_model(out)
        winner = store.model_path("m")
        winner.mkdir()
        (winner / "winner").write_text("")

    path = store.install("m", racing)
    assert (path / "winner").exists()
    assert [p.name for p in store.models_dir.iterdir()] == ["m"]
