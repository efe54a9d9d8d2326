"""manifest.json: what an imported model folder was made from (written by our importers)."""

from __future__ import annotations

import json
from pathlib import Path

from mlxctl import __version__

MANIFEST = "manifest.json"


def write_manifest(
    folder: Path, *, name: str, source: str, source_sha256: str, recipe: str
) -> None:
    data = {
        "name": name,
        "source": source,
        "source_sha256": source_sha256,
        "recipe": recipe,
        "mlxctl": __version__,
    }
    (folder / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")


def model_name(folder: Path) -> str:
    """The name in the folder's manifest, else the folder's own name."""
    try:
        return str(json.loads((folder / MANIFEST).read_text())["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return folder.resolve().name
