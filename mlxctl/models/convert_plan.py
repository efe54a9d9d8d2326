"""The conversion asked for: option checks, the mixed recipes, ``--quantize auto`` (bits chosen
from memory, see :func:`auto_bits`), and the default output name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlxctl.errors import BadInputError
from mlxctl.models.convert_source import Source, read_config

QUANTIZE_CHOICES = ("2", "3", "4", "6", "8", "auto", "none")
GROUP_SIZES = (32, 64, 128)
DEFAULT_GROUP_SIZE = 64
CONVERT_DTYPES = ("float16", "bfloat16", "float32")
# mixed recipe -> (low bits, high bits); the names and choices are mlx-lm's QUANT_RECIPES
RECIPES = {"mixed_2_6": (2, 6), "mixed_3_4": (3, 4), "mixed_3_6": (3, 6), "mixed_4_6": (4, 6)}
AUTO_BITS = (8, 6, 4)  # quantize=auto tries these, largest first
SCALE_BIAS_BITS = 32  # affine quantisation stores a 16-bit scale and bias per group


@dataclass(frozen=True)
class Plan:
    """The conversion asked for, with ``auto`` resolved."""

    quantize: str  # as asked
    bits: int | None  # None: no quantisation
    group_size: int | None
    recipe: str | None
    dtype: str | None  # as asked (None: the source's own)
    auto_rule: str | None = None  # how auto chose, in words


def check_options(
    quantize: str | None, group_size: int | None, recipe: str | None, dtype: str | None
) -> None:
    """Refuse option values and combinations that do not make sense (BadInputError)."""
    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise BadInputError(
            f"--quantize must be one of {', '.join(QUANTIZE_CHOICES)}, got {quantize!r}"
        )
    if group_size is not None and group_size not in GROUP_SIZES:
        raise BadInputError(
            f"--group-size must be one of {', '.join(map(str, GROUP_SIZES))}, got {group_size}"
        )
    if recipe is not None and recipe not in RECIPES:
        raise BadInputError(f"--recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    if dtype is not None and dtype not in CONVERT_DTYPES:
        raise BadInputError(f"--dtype must be one of {', '.join(CONVERT_DTYPES)}, got {dtype!r}")
    if recipe is not None and quantize not in (None, "none") and quantize != str(RECIPES[recipe][0]):
        raise BadInputError(
            f"--recipe {recipe} sets the bits itself; leave out --quantize {quantize}"
        )
    if recipe is not None and quantize == "none":
        raise BadInputError(f"--recipe {recipe} quantizes; it cannot go with --quantize none")
    if group_size is not None and recipe is None and quantize in (None, "none"):
        raise BadInputError("--group-size applies only with --quantize or --recipe")


def make_plan(
    source: Source,
    quantize: str | None,
    group_size: int | None,
    recipe: str | None,
    dtype: str | None,
) -> Plan:
    quantize = quantize or "none"
    if recipe is not None:
        quantize = str(RECIPES[recipe][0])
    wants_quant = quantize != "none"
    if wants_quant and (already := _source_quantization(source)):
        raise BadInputError(
            f"{source.path.name} is already quantized ({already}); converting it again needs "
            "float weights, so leave out --quantize and --recipe"
        )
    group = (group_size or DEFAULT_GROUP_SIZE) if wants_quant else None
    if quantize != "auto":
        bits = int(quantize) if wants_quant else None
        return Plan(quantize, bits, group, recipe, dtype)
    from mlxctl.models.inspect import memory_limit, read_facts

    parameters = read_facts(source.path).parameters
    limit, where = memory_limit()
    if not parameters or not limit:
        raise BadInputError(
            "--quantize auto cannot tell the model's size or this machine's memory",
            hint="give the bits: --quantize 4, 6 or 8",
        )
    bits = auto_bits(parameters, group or DEFAULT_GROUP_SIZE, limit)
    size = quantized_bytes(parameters, bits, group or DEFAULT_GROUP_SIZE)
    rule = (
        f"auto: {bits}-bit ({_gb(size)} of weights; budget half of the {where}, "
        f"{_gb(limit // 2)}{'; even 4-bit is over it' if size > limit // 2 else ''})"
    )
    return Plan("auto", bits, group, None, dtype, rule)


def auto_bits(parameters: int, group_size: int, limit_bytes: int) -> int:
    """The largest of 8, 6 and 4 bits whose weights fit in half of ``limit_bytes`` (4 if none).

    Weights at b bits take ``parameters x (b + 32 / group_size) / 8`` bytes: the packed values
    plus a 16-bit scale and bias per group. Half the limit leaves room for the KV cache,
    activations and the rest of the machine.
    """
    budget = limit_bytes // 2
    for bits in AUTO_BITS:
        if quantized_bytes(parameters, bits, group_size) <= budget:
            return bits
    return AUTO_BITS[-1]


def quantized_bytes(parameters: int, bits: int, group_size: int) -> int:
    return int(parameters * (bits + SCALE_BIAS_BITS / group_size) / 8)


def _source_quantization(source: Source) -> str | None:
    """A description of the source's quantisation, or None for float weights."""
    if source.kind == "gguf":
        from mlxctl.models.gguf_header import read_header

        types = set(read_header(source.path).tensor_types.values()) - {"F32", "F16"}
        return ", ".join(sorted(types)) or None
    config = read_config(source.path)
    quant = config.get("quantization") or config.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    if "bits" in quant:
        return f"{quant['bits']}-bit"
    return str(quant.get("quant_method") or "quantized")


def default_name(source: Source, plan: Plan) -> str:
    """``<source>-4bit``, ``<source>-mixed_4_6``, ``<source>-bfloat16`` or ``<source>-mlx``."""
    if plan.recipe:
        suffix = plan.recipe
    elif plan.bits:
        suffix = f"{plan.bits}bit"
    else:
        suffix = plan.dtype or "mlx"
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", source.base_name).strip("-.") or "model"
    cleaned = cleaned if cleaned[0].isalnum() else f"m{cleaned}"
    return f"{cleaned}-{suffix}"


def plan_text(plan: Plan) -> str:
    if plan.recipe:
        low, high = RECIPES[plan.recipe]
        what = f"{plan.recipe}: {low}/{high}-bit, group size {plan.group_size}"
    elif plan.bits:
        what = f"{plan.bits}-bit, group size {plan.group_size}"
    else:
        what = "not quantized"
    return what + (f", {plan.dtype}" if plan.dtype else "")


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"
