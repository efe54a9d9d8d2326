"""Convert a GGUF file with our own importer (:mod:`mlxctl.models.gguf`), which keeps quantised
tensors (legacy blocks and K-quants) quantised. A float GGUF (F32/F16/BF16) can then be quantised
or cast: the imported folder goes through mlx-lm's convert like any safetensors folder."""

from __future__ import annotations

import tempfile
from pathlib import Path

from mlxctl.models.convert_mlx_lm import mlx_lm_convert
from mlxctl.models.convert_plan import Plan
from mlxctl.models.resolve import Progress


def convert_gguf(path: Path, plan: Plan, out: Path, work_root: Path, progress: Progress) -> str:
    """Import ``path`` into ``out``, through mlx-lm when ``plan`` casts or quantises; the method
    (``gguf-qwen2``, or ``gguf-qwen2+mlx-lm``: named after the file's architecture)."""
    from mlxctl.models.gguf import recipe
    from mlxctl.models.gguf_header import read_header

    method = recipe(read_header(path).architecture)
    if plan.bits is None and plan.dtype is None:
        import_gguf_file(path, out, progress)
        return method
    with tempfile.TemporaryDirectory(prefix=".convert-", dir=work_root) as work:
        imported = import_gguf_file(path, Path(work) / "imported", progress)
        mlx_lm_convert(imported, out, plan, progress)
    return f"{method}+mlx-lm"


def import_gguf_file(path: Path, out: Path, progress: Progress) -> Path:
    from mlxctl.models.gguf import import_gguf

    return import_gguf(path, out, progress, name=path.stem)
