"""The dummy-weight presets of published models (gpt-oss, Gemma 3, Qwen3-Next, Qwen3.5, LFM2): each
parses with its mlx-lm module, a shrunken copy builds, runs and has the real cache mix, and the
full-size ones have the published parameter counts, counted on lazy arrays (nothing drawn)."""

from __future__ import annotations

import dataclasses
import importlib
import json

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import make_prompt_cache

from mlxctl.engine.engine import Engine
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError
from mlxctl.models.dummy import PRESETS, build_model, dummy_config, load_dummy
from mlxctl.models.dummy_quantize import quantize_dummy
from tests.models.dummy_shrink import shrunk

R, F, A = "RotatingKVCache", "KVCache", "ArraysCache"
# preset: (mlx-lm module, cache kinds of one pattern period, parameters in billions: low, high)
PUBLISHED = {
    "gpt-oss-20b": ("gpt_oss", [R, F], (20.85, 20.95)),  # 20.91B (model card)
    "gemma3-12b": ("gemma3_text", [R] * 5 + [F], (11.7, 11.8)),  # 11.77B text tower, tied embeddings
    "qwen3-next-80b-a3b": ("qwen3_next", [A] * 3 + [F], (79.0, 81.0)),
    "qwen3.5-35b-a3b": ("qwen3_5_moe", [A] * 3 + [F], (34.0, 35.5)),  # 35B with the vision tower
    "qwen3.5-35b-a3b-4bit": ("qwen3_5_moe", [A] * 3 + [F], (34.0, 35.5)),
    "lfm2-1.2b": ("lfm2", [A, A, F, A, A, F, A, A, F, A, F, A, F, A, F], (1.15, 1.2)),  # 1.17B (model card)
}
READ_ELSEWHERE = {"quantization", "max_position_embeddings", "tie_word_embeddings"}  # dummy.py, context_length
TOKENIZER_VOCAB = 49152  # SmolLM2's


def text_args(name: str):
    """(the preset's text-model keys, the args its module's Model was built with: the text
    tower's for a nested config). The model is full size but lazy, so nothing is drawn."""
    module, _, _ = PUBLISHED[name]
    config = dummy_config(name)[1]
    arch = importlib.import_module(f"mlx_lm.models.{module}")
    model = arch.Model(arch.ModelArgs.from_dict(config))
    return config.get("text_config", config), getattr(model, "language_model", model).args


@pytest.mark.parametrize("name", PUBLISHED)
def test_every_key_is_one_the_module_reads_and_it_takes_the_values(name):
    keys, args = text_args(name)
    fields = {f.name for f in dataclasses.fields(args)}
    assert set(keys) - fields <= READ_ELSEWHERE, name
    scalars = {k: v for k, v in keys.items() if k in fields and not isinstance(v, dict)}
    assert {k: getattr(args, k) for k in scalars} == scalars


@pytest.mark.parametrize("name", PUBLISHED)
def test_a_shrunken_copy_runs_a_forward_pass_with_the_real_cache_mix(name):
    _, kinds, _ = PUBLISHED[name]
    config = shrunk(dummy_config(name)[1])
    model = build_model(config)
    quantize_dummy(model, config)
    cache = make_prompt_cache(model)
    logits = model(mx.array([[1, 2, 3, 4, 5]]), cache=cache)
    vocab = config.get("text_config", config)["vocab_size"]
    assert logits.shape == (1, 5, vocab)
    assert mx.isfinite(logits).all().item()
    assert [type(c).__name__ for c in cache] == kinds


def test_sliding_layers_keep_the_published_windows():
    for name, window in (("gpt-oss-20b", 128), ("gemma3-12b", 1024)):
        caches = make_prompt_cache(build_model(shrunk(dummy_config(name)[1])))
        assert {c.max_size for c in caches if type(c).__name__ == R} == {window}, name


@pytest.mark.parametrize("name", PUBLISHED)
def test_the_full_size_model_has_the_published_parameter_count_without_drawing_a_weight(name):
    _, _, (low, high) = PUBLISHED[name]
    before = mx.get_active_memory()  # (other tests of the session may hold models)
    model = build_model(dummy_config(name)[1])  # lazy: arrays have shapes, no memory
    count = sum(w.size for _, w in tree_flatten(model.parameters())) / 1e9
    assert low <= count <= high
    assert mx.get_active_memory() - before < 2**30


def test_gemma3_ties_its_embeddings_as_its_checkpoint_does():
    model = build_model(shrunk(dummy_config("gemma3-12b")[1]))
    assert "lm_head" not in model and model.tie_word_embeddings


@pytest.mark.parametrize("name, low, high", [("qwen3-next-80b-a3b", 40, 50), ("qwen3.5-35b-a3b-4bit", 17, 22),
                                           ("llama-3.1-8b-4bit", 4, 5.5)])
def test_the_4bit_presets_weigh_what_a_4bit_checkpoint_does(name, low, high):
    config = dummy_config(name)[1]
    before = mx.get_active_memory()  # (other tests of the session may hold models)
    model = build_model(config)
    model.set_dtype(mx.bfloat16)
    quantize_dummy(model, config)  # still lazy
    size = sum(w.nbytes for _, w in tree_flatten(model.parameters())) / 1e9
    assert low <= size <= high  # an 80B model on one 141 GB GPU, with room for its caches
    assert mx.get_active_memory() - before < 2**30


def test_quantising_follows_the_architecture_like_mlx_lm_convert():
    config = shrunk(dummy_config("qwen3-next-80b-a3b")[1])
    model = build_model(config)
    quantize_dummy(model, config)
    moe = model.model.layers[0].mlp
    assert (moe.switch_mlp.gate_proj.bits, moe.switch_mlp.gate_proj.group_size) == (4, 64)
    assert (moe.gate.bits, moe.shared_expert_gate.bits) == (8, 8)  # its quant_predicate: routers at 8 bits


def test_a_config_without_quantization_stays_full_precision():
    config = shrunk(dummy_config("qwen3.5-35b-a3b")[1])
    model = build_model(config)
    quantize_dummy(model, config)
    assert all(w.dtype != mx.uint32 for _, w in tree_flatten(model.parameters()))


@pytest.mark.parametrize("quantization, named", [({"bits": 4}, "group_size"), ({"group_size": 64, "bits": "4"}, "bits"),
                                                 ({"group_size": 64, "bits": 4, "mode": "fp3"}, "fp3"),
                                                 ({"group_size": 64, "bits": 5, "mode": "mxfp4"}, "5 bits")])
def test_a_bad_quantization_entry_is_refused_by_name(tmp_path, smollm2, quantization, named):
    config = dict(shrunk(dummy_config("qwen3-next-80b-a3b")[1]), quantization=quantization)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(BadInputError, match=named):
        load_dummy(str(tmp_path), smollm2.path, "float32")


@pytest.mark.parametrize("name", ["qwen3.5-35b-a3b-4bit", "gemma3-12b"])
def test_a_quantised_or_nested_preset_generates_only_tokens_the_tokenizer_has(tmp_path, smollm2, name):
    (tmp_path / "config.json").write_text(json.dumps(shrunk(dummy_config(name)[1])))
    loaded = load_dummy(str(tmp_path), smollm2.path, "float32")
    unknown = loaded.model(mx.array([[1, 2, 3]]))[..., TOKENIZER_VOCAB:]
    assert (unknown == 0).all().item()  # silenced before quantising: packed zeros dequantise to 0
    with Engine(lambda: loaded) as engine:
        got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)).collect()
    assert len(got.token_ids) == 12 and all(t < TOKENIZER_VOCAB for t in got.token_ids)
    assert got.text.strip()


def test_every_new_preset_is_a_listed_preset():
    assert set(PUBLISHED) <= set(PRESETS)
