"""/api/tags, /api/show, /api/ps, /api/version, /api/pull and the error shape, with the ollama client."""

from __future__ import annotations

import httpx
import ollama
import pytest

from tests.server.infra import MODEL, served

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


@pytest.fixture(scope="module")
def client(url) -> ollama.Client:
    return ollama.Client(host=url)


def test_tags_list_the_served_model(client):
    (model,) = client.list().models
    assert model.model == MODEL and model.size > 0 and model.details.format == "mlx"


def test_show_gives_template_context_and_capabilities(client):
    shown = client.show(MODEL)
    assert "completion" in shown.capabilities and "tools" in shown.capabilities
    assert shown.template and shown.modelinfo["llama.context_length"] == 8192


def test_show_of_an_unknown_model_is_404(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.show("nope")
    assert err.value.status_code == 404 and "nope" in err.value.error


def test_ps_lists_the_loaded_model(client):
    (running,) = client.ps().models
    assert running.model == MODEL and running.context_length == 8192 and running.size_vram > 0


def test_version(url):
    assert httpx.get(f"{url}/api/version").json()["version"]


def test_pull_of_an_unknown_model_is_an_ollama_error(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.pull("no-such-model-xyz")
    assert err.value.status_code == 404 and "no-such-model-xyz" in err.value.error


def test_pull_stream_of_an_unknown_model_is_an_ollama_error(client):
    with pytest.raises(ollama.ResponseError) as err:
        list(client.pull("no-such-model-xyz", stream=True))
    assert "unknown model" in err.value.error


def test_embed_on_the_chat_model_is_a_clear_error(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.embed(model=MODEL, input="x")
    assert err.value.status_code == 400 and "--embedding-model" in err.value.error


@pytest.mark.parametrize(("body", "field"), [
    ({"options": {"temperature": "hot"}}, "options.temperature"),
    ({"options": {"bogus": 1}}, "options.bogus"),
    ({"options": {"mirostat": 2}}, "options.mirostat"),
    ({"options": {"num_predict": 0}}, "options.num_predict"),
    ({"options": {"repeat_penalty": 1.1, "repeat_last_n": 64}}, "options.repeat_last_n"),
    ({"format": "yaml"}, "format"),
    ({"think": True}, "think"),
    ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "messages.0.images.0"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
])
def test_bad_input_is_400_naming_the_field(url, body, field):
    r = httpx.post(f"{url}/api/chat", json={"model": MODEL, "messages": HI, **body}, timeout=60)
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and field in r.json()["error"]


def test_unknown_model_is_404_in_ollama_shape(url):
    r = httpx.post(f"{url}/api/chat", json={"model": "nope", "messages": HI}, timeout=60)
    assert r.status_code == 404 and set(r.json()) == {"error"}
