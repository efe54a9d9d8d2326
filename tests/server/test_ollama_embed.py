"""/api/embed and /api/embeddings with the ollama client, on the real MiniLM (serve --embedding-model)."""

from __future__ import annotations

import numpy as np
import ollama
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.embed.conftest import minilm  # noqa: F401 - the MiniLM fixture

NAME = "minilm-l6"


@pytest.fixture(scope="module")
def client(engine, minilm):  # noqa: F811
    settings = ServeSettings(model_name="smollm2-135m", embedding_model=str(minilm[1]))
    server = BackgroundServer(init_app(engine, settings)).start()
    yield ollama.Client(host=server.url)
    server.stop()


def test_embed_gives_unit_vectors_per_input(client):
    out = client.embed(model=NAME, input=["a cat", "a dog"])
    vectors = np.array(out.embeddings)
    assert vectors.shape[0] == 2 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)


def test_older_embeddings_endpoint(client):
    one = client.embeddings(model=NAME, prompt="a cat")
    assert len(one.embedding) == len(client.embed(model=NAME, input="a cat").embeddings[0])


def test_embed_of_the_chat_model_is_refused(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.embed(model="smollm2-135m", input="x")
    assert err.value.status_code == 400 and NAME in err.value.error
