"""Where mlxctl keeps models and downloaded wheels, and how a model folder gets installed.

A model folder appears in the store only once it is complete: it is built in a temporary folder
on the same filesystem and renamed into place with ``os.replace``, so an interrupted import never
leaves a half-written folder that looks like a model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_PARTIAL_PREFIX = ".partial-"


def mlxctl_home() -> Path:
    """$MLXCTL_HOME, else $XDG_CACHE_HOME/mlxctl, else ~/.cache/mlxctl."""
    if home := os.environ.get("MLXCTL_HOME"):
        return Path(home).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "mlxctl"
    return Path.home() / ".cache" / "mlxctl"


class ModelStore:
    """The store's folders: ``models/<name>`` for imported models, ``wheels/`` for wheels."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else mlxctl_home()

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def wheels_dir(self) -> Path:
        return self.root / "wheels"

    def model_path(self, name: str) -> Path:
        return self.models_dir / name

    def has(self, name: str) -> bool:
        return self.model_path(name).is_dir()

    def names(self) -> list[str]:
        """Names of the complete models in the store."""
        if not self.models_dir.is_dir():
            return []
        return sorted(p.name for p in self.models_dir.iterdir() if _is_complete(p))

    def install(self, name: str, build: Callable[[Path], object]) -> Path:
        """Return the folder of model ``name``, calling ``build(tmp_dir)`` to make it if absent."""
        final = self.model_path(name)
        if final.is_dir():
            return final
        self.models_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_PARTIAL_PREFIX}{name}-", dir=self.models_dir))
        try:
            build(tmp)
            _publish(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final


def _publish(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; if another process won the race, keep theirs."""
    try:
        os.replace(tmp, final)
    except OSError:
        if not final.is_dir():
            raise


def _is_complete(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(_PARTIAL_PREFIX)
