"""What a converted model's manifest records: the ``recipe`` (the source and every choice that
made the files) and the source's sha256."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlxctl import __version__
from mlxctl.models.convert_plan import RECIPES, Plan
from mlxctl.models.convert_source import Source, read_config


def recipe_record(source: Source, plan: Plan, out: Path, method: str) -> dict:
    """What the manifest's ``recipe`` records: the source and every choice that made the files.

    ``bits`` / ``group_size`` are what the weights hold (for a GGUF import, its block type);
    ``dtype`` is the float type of the unquantized tensors in the output."""
    import mlx_lm

    from mlxctl.models.inspect import read_facts

    config = read_config(out)
    quant = config.get("quantization") if isinstance(config.get("quantization"), dict) else {}
    facts = read_facts(out)
    bits = plan.bits if plan.bits is not None else quant.get("bits")
    group = plan.group_size if plan.group_size is not None else quant.get("group_size")
    low_high = RECIPES.get(plan.recipe or "")
    return {
        "method": method,
        "source": source.describe,
        "name": plan.recipe,
        "quantize": plan.quantize,
        "bits": bits,
        "high_bits": low_high[1] if low_high else None,
        "group_size": group,
        "mode": quant.get("mode", "affine") if bits else None,
        "dtype": facts.dtype,
        "dtype_requested": plan.dtype,
        "bits_per_weight": _bits_per_weight(facts),
        "mlx_lm": mlx_lm.__version__,
        "mlxctl": __version__,
    }


def _bits_per_weight(facts: Any) -> float | None:
    if not facts.parameters or not facts.weights_bytes:
        return None
    return round(facts.weights_bytes * 8 / facts.parameters, 3)


def source_sha256(source: Source) -> str | None:
    if source.kind != "gguf":
        return None
    from mlxctl.models.digest import file_sha256

    return file_sha256(source.path)
