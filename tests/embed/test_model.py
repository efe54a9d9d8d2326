"""The embedding model layer: sentence-transformers configs, tokens, pooling, batching, cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlxctl.embed.cache import LRUCache
from mlxctl.embed.config import read_config
from mlxctl.embed.errors import InputTooLongError
from mlxctl.errors import BadInputError, ModelFormatError
from tests.embed.conftest import COSINE, SENTENCES


def write(folder, name, data):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def st_folder(tmp_path, pooling=None, normalize=True, extra=(), max_seq=128):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    modules.extend(extra)
    write(tmp_path, "modules.json", modules)
    write(tmp_path, "config.json", {"max_position_embeddings": 512})
    write(tmp_path, "sentence_bert_config.json", {"max_seq_length": max_seq})
    if pooling is not None:
        write(tmp_path, "1_Pooling/config.json", pooling)
    return tmp_path


def test_minilm_config(minilm):
    config = read_config(minilm[1])
    assert (config.pooling, config.normalize, config.max_tokens) == (("mean",), True, 256)


def test_config_variants(tmp_path):
    cls = st_folder(tmp_path / "a", {"pooling_mode_cls_token": True}, normalize=False, max_seq=1024)
    config = read_config(cls)
    assert (config.pooling, config.normalize, config.max_tokens) == (("cls",), False, 512)  # capped
    both = st_folder(tmp_path / "b", {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True})
    assert read_config(both).pooling == ("max", "mean")  # sentence-transformers' order
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    with pytest.raises(ModelFormatError, match="Dense"):
        read_config(st_folder(tmp_path / "c", {"pooling_mode_mean_tokens": True}, extra=[dense]))
    write(tmp_path / "d", "config.json", {"max_position_embeddings": 128})  # no modules.json
    plain = read_config(tmp_path / "d")
    assert (plain.pooling, plain.normalize, plain.max_tokens, plain.sentence_transformers) == (("mean",), True, 128, False)


def test_lru_cache_evicts_least_recent():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3


def test_cosine_of_the_reference_pair(embedder):
    a, b = embedder.embed(embedder.prepare(list(SENTENCES), truncate=False).ids)
    assert embedder.dimensions == 384
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert float(a @ b) == pytest.approx(COSINE, abs=0.01)


def test_batches_keep_order_and_match_single_runs(embedder):
    texts = ["short", "a somewhat longer sentence about the weather today", *SENTENCES, "x " * 40]
    together = embedder.embed(embedder.prepare(texts, truncate=False).ids)
    embedder.cache.clear()
    alone = np.stack([embedder.embed(embedder.prepare([t], truncate=False).ids)[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_identical_inputs_hit_the_cache(embedder):
    ids = embedder.prepare(["the cache remembers this one"], truncate=False).ids
    first = embedder.embed(ids)
    hits = embedder.cache.hits
    np.testing.assert_array_equal(embedder.embed(ids), first)
    assert embedder.cache.hits == hits + 1


def test_normalize_is_a_choice(embedder):
    ids = embedder.prepare([SENTENCES[0]], truncate=False).ids
    raw = embedder.embed(ids, normalize=False)[0]
    assert abs(np.linalg.norm(raw) - 1) > 0.01
    np.testing.assert_allclose(raw / np.linalg.norm(raw), embedder.embed(ids)[0], atol=1e-6)


def test_overlong_input_is_refused_or_truncated_with_specials_kept(embedder):
    texts = ["fine", "word " * 300]
    with pytest.raises(InputTooLongError) as info:
        embedder.prepare(texts, truncate=False)
    assert (info.value.index, info.value.tokens, info.value.limit) == (1, 302, 256)
    assert "input 1 has 302 tokens" in info.value.message
    fitted = embedder.prepare(texts, truncate=True)
    assert fitted.truncated == [(1, 302)] and len(fitted.ids[1]) == 256
    assert fitted.ids[1][0] == embedder.tokens.prefix[0] and fitted.ids[1][-1] == embedder.tokens.suffix[-1]


def test_token_ids_are_wrapped_like_text(embedder):
    body = embedder.tokens.body([SENTENCES[0]])[0]
    assert embedder.tokens.from_ids([body]) == embedder.tokens.encode([SENTENCES[0]])
    with pytest.raises(BadInputError, match="outside the vocabulary"):
        embedder.tokens.from_ids([[10**9]])


def test_empty_text_is_refused(embedder):
    with pytest.raises(BadInputError, match="input 1 is empty"):
        embedder.prepare(["a", "  "], truncate=False)
