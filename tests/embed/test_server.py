"""POST /v1/embeddings and /v1/rerank on a real server with the real MiniLM (and SmolLM2 as chat)."""

from __future__ import annotations

import base64
import dataclasses
import threading

import httpx
import numpy as np
import openai
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from mlxctl.server.views.embeddings import EMBEDDINGS
from tests.embed.conftest import COSINE, SENTENCES

NAME = "minilm-l6"


@pytest.fixture(scope="module")
def server(smollm2_engine, minilm):
    settings = ServeSettings(model_name="smollm2-135m", embedding_model=str(minilm[1]))
    running = BackgroundServer(init_app(smollm2_engine, settings)).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def url(server) -> str:
    return server.url


@pytest.fixture
def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x")


def post(url: str, path: str = "/v1/embeddings", **body) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


def vectors(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([d["embedding"] for d in response.json()["data"]])


def error(response: httpx.Response, status: int, param: str | None) -> str:
    assert response.status_code == status, response.text
    err = response.json()["error"]
    assert err["param"] == param and err["type"] in ("invalid_request_error", "not_found_error")
    return err["message"]


def test_openai_client_reference_cosine(client):
    for encoding in (openai.NOT_GIVEN, "float"):  # the client asks for base64 when not told
        resp = client.embeddings.create(model=NAME, input=list(SENTENCES), encoding_format=encoding)
        a, b = (np.array(d.embedding) for d in resp.data)
        assert a.shape == (384,) and float(a @ b) == pytest.approx(COSINE, abs=0.01)
        assert resp.model == NAME and [d.index for d in resp.data] == [0, 1]
        assert resp.usage.prompt_tokens == resp.usage.total_tokens == 8 + 11


def test_base64_equals_floats(url):
    floats = vectors(post(url, input=SENTENCES[0]))
    resp = post(url, input=SENTENCES[0], encoding_format="base64")
    raw = resp.json()["data"][0]["embedding"]
    decoded = np.frombuffer(base64.b64decode(raw), dtype="<f4")
    np.testing.assert_array_equal(decoded, floats[0].astype(np.float32))


def test_batch_keeps_order(url):
    texts = ["zebra", "a much longer sentence about trains and stations", *SENTENCES, "one more"]
    together = vectors(post(url, input=texts))
    alone = np.concatenate([vectors(post(url, input=t)) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_token_id_inputs(url, embedder):
    body = embedder.tokens.body([SENTENCES[0]])[0]
    text = vectors(post(url, input=SENTENCES[0]))
    np.testing.assert_allclose(vectors(post(url, input=body)), text, atol=1e-6)
    np.testing.assert_allclose(vectors(post(url, input=[body, body])), np.vstack([text, text]), atol=1e-6)


def test_concurrent_requests_are_gathered(server, url):
    service = server.app[EMBEDDINGS]
    service.window_s = 0.3  # wide enough that the requests below surely meet
    before = dataclasses.replace(service.stats)
    results: dict[int, np.ndarray] = {}

    def one(i: int) -> None:
        results[i] = vectors(post(url, input=f"concurrent request number {i}"))[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        service.window_s = 0.005
    assert sorted(results) == list(range(6))
    assert service.stats.requests - before.requests == 6
    assert service.stats.batches - before.batches < 6 and service.stats.largest_batch > 1


def test_errors_are_openai_shaped_400s(url):
    assert "empty" in error(post(url, input=""), 400, "input")
    assert "empty" in error(post(url, input=[]), 400, "input")
    assert "input 1 is empty" in error(post(url, input=["a", ""]), 400, "input")
    long = "word " * 300
    message = error(post(url, input=["fine", long]), 400, "input")
    assert "input 1 has 302 tokens" in message and "truncate" in message
    ok = post(url, input=["fine", long], truncate=True)
    assert ok.status_code == 200 and ok.json()["usage"]["prompt_tokens"] == 3 + 256
    error(post(url, input="a", encoding_format="int8"), 400, "encoding_format")
    assert "Matryoshka" in error(post(url, input="a", dimensions=128), 400, "dimensions")
    assert post(url, input="a", dimensions=384).status_code == 200
    error(post(url, input=["a", 1]), 400, "input")
    assert "at most 2048" in error(post(url, input=["a"] * 2049), 400, "input")
    error(post(url, input="a", color="red"), 400, "color")
    assert "outside the vocabulary" in error(post(url, input=[999999]), 400, "input")


def test_models(url):
    assert "not found" in error(post(url, input="a", model="nope"), 404, "model")
    assert "chat model" in error(post(url, input="a", model="smollm2-135m"), 400, "model")
    ids = [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]]
    assert "smollm2-135m" in ids and NAME in ids
    assert post(url, input="a", user="someone").json()["model"] == NAME  # model optional, user advisory


def test_rerank(url):
    docs = ["The stock market fell sharply today.", "A man is eating a piece of bread.", "Cats sleep a lot."]
    resp = post(url, "/v1/rerank", query="A man is eating food.", documents=docs, top_n=2)
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert results[0]["index"] == 1 and len(results) == 2
    assert results[0]["relevance_score"] == pytest.approx(COSINE, abs=0.01)
    assert results[0]["document"] == {"text": docs[1]}
    assert results[0]["relevance_score"] >= results[1]["relevance_score"]
    error(post(url, "/v1/rerank", query="q", documents=[]), 400, "documents")


def test_openapi_lists_the_endpoints(url):
    doc = httpx.get(url + "/openapi.json").json()
    schema = doc["paths"]["/v1/embeddings"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/EmbeddingsRequest"}
    assert "/v1/rerank" in doc["paths"]


def test_without_an_embedding_model(smollm2_engine):
    running = BackgroundServer(init_app(smollm2_engine, ServeSettings(model_name="smollm2-135m"))).start()
    try:
        assert "--embedding-model" in error(post(running.url, input="a", model=NAME), 404, "model")
        ids = [m["id"] for m in httpx.get(running.url + "/v1/models").json()["data"]]
        assert NAME not in ids
    finally:
        running.stop()


def test_runs_beside_chat_generation(url, client):
    """The embedding thread and the chat engine's thread compute at the same time."""
    reference = vectors(post(url, input=list(SENTENCES)))
    answers: list[str] = []
    chat = threading.Thread(target=lambda: answers.append(client.chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0, max_tokens=4).choices[0].message.content))
    chat.start()
    for i in range(3):
        np.testing.assert_allclose(vectors(post(url, input=[*SENTENCES, f"extra {i}"]))[:2], reference, atol=1e-5)
    chat.join(60)
    assert answers and answers[0]
