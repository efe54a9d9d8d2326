"""``mlxctl model convert``: a Hugging Face safetensors model or a GGUF file to an MLX folder.

Sources are found without downloading (:func:`mlxctl.models.inspect.locate`): a store name, a
folder with config.json and ``*.safetensors``, a ``.gguf`` file (or a store folder holding one),
or a Hugging Face repo id already in the local HF cache.

- **Safetensors** go through mlx-lm's public ``mlx_lm.convert.convert``: weights cast to
  ``dtype`` (default: the config's ``torch_dtype``), then optionally quantised (affine, ``bits``
  and ``group_size``) or quantised by a mixed recipe (mlx-lm's ``mixed_*`` quant predicates:
  a few sensitive layers, such as ``v_proj``, ``down_proj`` in the first and last eighth of the
  layers and ``lm_head``, get the high bit count, the rest the low one).
- **GGUF** files go through our own importer (:mod:`mlxctl.models.gguf`), which keeps Q4_0,
  Q4_1 and Q8_0 tensors quantised. A float GGUF (F32/F16) can then be quantised or cast: the
  imported folder goes through mlx-lm's convert like any safetensors folder.
- ``quantize="auto"`` picks bits from memory: see :func:`auto_bits`.

The result is installed in the store under a ``.partial-`` name and renamed into place; its
manifest's ``recipe`` records the source and every choice (see
:func:`mlxctl.models.convert_record.recipe_record`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mlxctl.errors import BadInputError
from mlxctl.models.convert_gguf import convert_gguf
from mlxctl.models.convert_mlx_lm import mixed_predicate, mlx_lm_convert
from mlxctl.models.convert_plan import (
    AUTO_BITS,
    CONVERT_DTYPES,
    DEFAULT_GROUP_SIZE,
    GROUP_SIZES,
    QUANTIZE_CHOICES,
    RECIPES,
    SCALE_BIAS_BITS,
    Plan,
    auto_bits,
    check_options,
    default_name,
    make_plan,
    plan_text,
    quantized_bytes,
)
from mlxctl.models.convert_record import recipe_record, source_sha256
from mlxctl.models.convert_source import Source, find_source, supported_architecture
from mlxctl.models.manifest import file_hashes, read_manifest, write_manifest
from mlxctl.models.resolve import Progress, _say
from mlxctl.models.store import ModelStore

__all__ = [
    "AUTO_BITS",
    "CONVERT_DTYPES",
    "DEFAULT_GROUP_SIZE",
    "GROUP_SIZES",
    "QUANTIZE_CHOICES",
    "RECIPES",
    "SCALE_BIAS_BITS",
    "Converted",
    "Plan",
    "Progress",
    "Source",
    "auto_bits",
    "check_options",
    "convert_model",
    "default_name",
    "find_source",
    "mixed_predicate",
    "quantized_bytes",
    "supported_architecture",
]


@dataclass(frozen=True)
class Converted:
    name: str
    path: Path
    manifest: dict
    converted: bool  # False when the store already held this very conversion


def convert_model(
    src: str,
    *,
    name: str | None = None,
    quantize: str | None = None,
    group_size: int | None = None,
    recipe: str | None = None,
    dtype: str | None = None,
    store: ModelStore | None = None,
    progress: Progress = None,
) -> Converted:
    """Convert ``src`` to MLX and install it in the store as ``name``."""
    from mlxctl.models.acquire import check_name

    store = store if store is not None else ModelStore()
    check_options(quantize, group_size, recipe, dtype)
    if name is not None:
        check_name(name)
    source = find_source(src, store)
    plan = make_plan(source, quantize, group_size, recipe, dtype)
    name = name or check_name(default_name(source, plan))
    if (existing := _existing(store, name, source, plan)) is not None:
        return existing
    _say(progress, f"converting {source.path.name} ({plan_text(plan)})")
    if plan.auto_rule:
        _say(progress, plan.auto_rule)
    folder = store.install(name, partial(_build, source, plan, name, store, progress))
    return Converted(name, folder, read_manifest(folder) or {}, True)


def _existing(store: ModelStore, name: str, source: Source, plan: Plan) -> Converted | None:
    """The store's ``name`` if it is this very conversion; a clash if it is anything else."""
    if not store.has(name):
        return None
    folder = store.model_path(name)
    manifest = read_manifest(folder) or {}
    recipe = manifest.get("recipe")
    same = {"source": source.describe, "bits": plan.bits, "group_size": plan.group_size,
            "name": plan.recipe, "dtype_requested": plan.dtype}  # fmt: skip
    if isinstance(recipe, dict) and all(recipe.get(k) == v for k, v in same.items()):
        return Converted(name, folder, manifest, False)
    raise BadInputError(
        f"the store already has a model called {name} (from {manifest.get('source', 'elsewhere')})",
        hint=f"pick another name with --name, or remove it first: mlxctl model rm {name}",
    )


# --- building -----------------------------------------------------------------------------


def _build(source: Source, plan: Plan, name: str, store: ModelStore, progress: Progress,
           out: Path) -> None:  # fmt: skip
    if source.kind == "gguf":
        method = convert_gguf(source.path, plan, out, store.root, progress)
    else:
        method = "mlx-lm"
        mlx_lm_convert(source.path, out, plan, progress)
    (out / "manifest.json").unlink(missing_ok=True)  # the importer's; ours replaces it
    _say(progress, "hashing the converted files")
    write_manifest(
        out,
        name=name,
        source=source.describe,
        source_sha256=source_sha256(source),
        recipe=recipe_record(source, plan, out, method),
        kind="chat",
        format="mlx",
        source_type=source.source_type,
        revision=source.revision,
        files=file_hashes(out),
    )
