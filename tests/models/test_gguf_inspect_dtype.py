"""``model inspect FILE.gguf`` names the dtype the imported model computes in: the dtype of the
keys and values mlx-lm caches when it runs the folder import_gguf makes of that file."""

from __future__ import annotations

import mlx.core as mx
import pytest

from mlxctl.models.gguf import import_gguf
from mlxctl.models.inspect import inspect_model
from tests.models.gguf_arch_writer import common_metadata, load_folder, random_model, u32, write_arch_gguf
from tests.models.helpers import tiny_vocab
from tests.models.test_gguf_qwen3 import QWEN3, QWEN3_BLOCK

WIDE = {**QWEN3, "hidden_size": 256, "intermediate_size": 256, "head_dim": 64}  # Q4_K rows of 256
BIG = (10**15, "test")
# (kind of the matrices, kind of the norms) -> the dtype mlx computes in
CASES = {("Q4_K", "F32"): "float32", ("Q8_0", "F32"): "float32", ("Q4_K", "F16"): "float32",
         ("Q8_0", "F16"): "float16", ("F16", "F16"): "float16"}  # fmt: skip


def _cached_dtype(folder) -> str:
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = load_folder(folder)
    cache = make_prompt_cache(model)
    model(mx.array([[1, 2, 3]]), cache=cache)
    return str(cache[0].keys.dtype).removeprefix("mlx.core.")


@pytest.mark.parametrize("matrices,norms", list(CASES))
def test_inspect_names_the_dtype_the_import_runs_in(tmp_path, matrices, norms):
    from mlx_lm.models import qwen3

    metadata = {**common_metadata("qwen3", WIDE), "qwen3.attention.key_length": u32(64)}
    kinds = lambda name, values: matrices if values.ndim == 2 else norms  # noqa: E731
    path = tmp_path / "m.gguf"
    write_arch_gguf(path, random_model(qwen3, {**WIDE, "vocab_size": len(tiny_vocab())}), QWEN3_BLOCK, metadata, kinds)
    reported = inspect_model(str(path), limit=BIG)["dtype"]
    assert reported == CASES[(matrices, norms)] == _cached_dtype(import_gguf(path, tmp_path / "out"))
