"""Convert a Hugging Face safetensors folder with mlx-lm's public ``mlx_lm.convert.convert``:
weights cast to ``dtype``, then optionally quantised (affine, ``bits`` and ``group_size``) or
quantised by a mixed recipe (mlx-lm's ``mixed_*`` quant predicates: a few sensitive layers get
the high bit count, the rest the low one)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mlxctl.errors import ModelFormatError
from mlxctl.models.convert_plan import DEFAULT_GROUP_SIZE, RECIPES, Plan
from mlxctl.models.convert_source import read_config
from mlxctl.models.resolve import Progress, _say


def mlx_lm_convert(folder: Path, out: Path, plan: Plan, progress: Progress) -> None:
    """mlx-lm's convert into ``out`` (which must exist and be empty)."""
    from mlx_lm.convert import convert

    target = out / ".mlx-lm"  # convert refuses a folder that exists
    kwargs: dict[str, Any] = {"dtype": plan.dtype}
    if plan.bits is not None:
        kwargs |= {"quantize": True, "q_bits": plan.bits, "q_group_size": plan.group_size}
    if plan.recipe is not None:
        kwargs["quant_predicate"] = _predicate(folder, plan.recipe, plan.group_size or DEFAULT_GROUP_SIZE)
    try:
        with _printed_to(progress):
            convert(str(folder), str(target), **kwargs)
    except (ValueError, KeyError, FileNotFoundError) as e:
        raise ModelFormatError(f"cannot convert {folder.name}: {_first_line(e)}") from None
    for entry in target.iterdir():
        entry.rename(out / entry.name)
    target.rmdir()


def _predicate(folder: Path, recipe: str, group_size: int) -> Any:
    """mlx-lm's quant predicate for ``recipe`` when it has one (its convert builds it from the
    name), else our own with the same rule."""
    from mlx_lm import convert as mlx_convert

    if recipe in getattr(mlx_convert, "QUANT_RECIPES", ()):
        return recipe
    config = read_config(folder)
    layers = config.get("num_hidden_layers") or (config.get("text_config") or {}).get(
        "num_hidden_layers"
    )
    if not isinstance(layers, int):
        raise ModelFormatError(f"--recipe {recipe}: {folder.name} does not say how many layers it has")
    return mixed_predicate(recipe, layers, group_size)


def mixed_predicate(recipe: str, num_layers: int, group_size: int) -> Callable[[str, Any], dict]:
    """A mixed-bits rule like llama.cpp's Q*_K_M: ``v_proj`` and ``down_proj`` of the first and
    last eighth of the layers and of every third layer between, and ``lm_head``, get the high
    bits; everything else the low bits. Used when mlx-lm lacks the recipe."""
    low, high = RECIPES[recipe]

    def predicate(path: str, module: Any) -> dict:
        index = next((int(p) for p in path.split(".") if p.isdigit()), 0)
        sensitive = (
            index < num_layers // 8
            or index >= 7 * num_layers // 8
            or (index - num_layers // 8) % 3 == 2
        )
        more = "lm_head" in path or (sensitive and ("v_proj" in path or "down_proj" in path))
        return {"group_size": group_size, "bits": high if more else low, "mode": "affine"}

    return predicate


@contextlib.contextmanager
def _printed_to(progress: Progress) -> Iterator[None]:
    """mlx-lm's convert prints ``[INFO] ...`` lines: send them to ``progress``, never stdout."""
    buffer = _Lines(progress, sys.stdout)
    with contextlib.redirect_stdout(buffer):
        yield
    buffer.flush()


class _Lines(io.TextIOBase):
    def __init__(self, progress: Progress, stdout: Any):
        self._progress = progress
        self._stdout = stdout  # what stdout was: progress may print
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._send(line)
        return len(text)

    def flush(self) -> None:
        pending, self._pending = self._pending, ""
        self._send(pending)

    def _send(self, line: str) -> None:
        if line.strip():
            with contextlib.redirect_stdout(self._stdout):
                _say(self._progress, line.replace("[INFO] ", "mlx-lm: ").strip())


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
