"""`qualify_model` / `qualify_url`: the scorecard on the real SmolLM2, in process and through a
real server, and a model that fails (no chat template)."""

from __future__ import annotations

import json
import shutil

import pytest

from mlxctl.server.runner import served_engine
from mlxctl.errors import UnavailableError
from mlxctl.models.qualify import (
    CHECKS,
    METRICS,
    Budget,
    Check,
    Scorecard,
    qualify_model,
    qualify_url,
    scorecard_text,
)

# short answers: each check still judges what it should, a CPU does it in seconds
SMALL = Budget(determinism=8, call=64, answer=8, json=48, speed=8)
MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def server_url(smollm2_engine):
    """mlxctl's server over the session's shared SmolLM2 engine, on a loopback port."""
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    server = BackgroundServer(init_app(smollm2_engine, ServeSettings(model_name=MODEL))).start()
    yield server.url
    server.stop()


@pytest.fixture
def no_template(tmp_path, smollm2):
    """SmolLM2 with its chat template taken out."""
    folder = tmp_path / "no-template"
    shutil.copytree(smollm2.path, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "manifest.json").unlink()
    return folder


def _assert_all_pass(card: Scorecard) -> None:
    assert [c.name for c in card.checks] == list(CHECKS)
    assert card.passed and not card.failed, scorecard_text(card)
    assert all(c.status == "pass" for c in card.checks)
    assert card.metrics["ttft_s"] > 0 and card.metrics["decode_tok_s"] > 0
    assert card.metrics["peak_memory_bytes"] > 50_000_000


@pytest.mark.slow
def test_in_process_scorecard(smollm2):
    card = qualify_model(str(smollm2.path), budget=SMALL, serve=served_engine)
    _assert_all_pass(card)
    assert card.target == "in-process" and card.model == MODEL
    assert card.metrics["load_s"] > 0 and card.check("loads").detail.startswith("loaded in ")
    assert card.metrics["tool_call_parser"].startswith("hermes (default")
    tool = card.check("tool_call").detail
    assert tool.startswith('get_weather({"city": "Paris"}) via hermes; then answered: ')
    assert card.check("json_mode").detail.startswith("a valid JSON object: ")
    document = card.as_dict()
    assert set(document) == {"model", "target", "passed", "checks", "metrics"}
    assert set(document["metrics"]) == set(METRICS)
    assert set(document["checks"][0]) == {"name", "status", "detail", "seconds"}
    json.dumps(document)


@pytest.mark.slow
def test_url_scorecard(server_url):
    card = qualify_url(server_url, budget=SMALL)
    _assert_all_pass(card)
    assert card.model == MODEL and card.target == server_url
    assert card.metrics["load_s"] is None  # loading happened elsewhere
    assert card.check("chat_template").detail == "renders a 3-turn chat (57 tokens)"


def test_url_model_not_served(server_url):
    card = qualify_url(server_url, model="other", budget=SMALL)
    assert not card.passed
    assert card.check("loads").status == "fail"
    assert f"does not list other (it lists {MODEL}" in card.check("loads").detail
    assert {c.status for c in card.checks[1:]} == {"skip"}


def test_without_chat_template_fails(no_template):
    card = qualify_model(str(no_template), budget=SMALL, serve=served_engine)
    statuses = {c.name: c.status for c in card.checks}
    assert statuses == {"loads": "pass", "chat_template": "fail", "deterministic": "skip",
                        "tool_call": "skip", "json_mode": "skip", "speed": "pass"}  # fmt: skip
    assert not card.passed and [c.name for c in card.failed] == ["chat_template"]
    assert card.check("chat_template").detail == "this model has no chat template"
    assert card.metrics["decode_tok_s"] > 0  # plain completions still run
    assert "DOES NOT QUALIFY" in scorecard_text(card)


def test_unreachable_url():
    from mlxctl.server.runner import free_port

    with pytest.raises(UnavailableError, match="cannot qualify http://127.0.0.1:"):
        qualify_url(f"http://127.0.0.1:{free_port()}")


def test_scorecard_text():
    card = Scorecard("m", "http://h:1", [Check("loads", "pass", "served", 0.1),
                                         Check("json_mode", "fail", "not valid JSON")],
                     {"load_s": None, "ttft_s": 0.0123, "decode_tok_s": 45.67,
                      "peak_memory_bytes": 2_500_000_000, "tool_call_parser": None})  # fmt: skip
    assert scorecard_text(card).splitlines() == [
        "m (http://h:1): DOES NOT QUALIFY",
        "  loads      pass  served",
        "  json mode  FAIL  not valid JSON",
        "  TTFT 12 ms; decode 45.7 tok/s; peak memory 2.5 GB",
    ]


def test_a_model_that_does_not_load(tmp_path, smollm2):
    import mlx.core as mx

    folder = tmp_path / "broken"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(smollm2.path / name, folder / name)
    mx.save_safetensors(str(folder / "model.safetensors"), {"stray": mx.zeros(4)})
    card = qualify_model(str(folder), budget=SMALL, serve=served_engine)
    assert [(c.name, c.status) for c in card.checks] == [("loads", "fail")] + [(n, "skip") for n in CHECKS[1:]]
    assert card.check("loads").detail.startswith("cannot load broken: ")
    assert not card.passed and card.metrics["load_s"] is None


def test_a_server_that_cannot_force_the_call_is_asked_with_tool_choice_auto():
    """A server (``qualify --url``: llama.cpp's, another) that refuses a named tool_choice with a
    400 is asked again with tool_choice auto, and the check says so; other refusals stay failures.
    Every format mlxctl serves can force calls, so the refusing server is a stand-in here."""
    from mlxctl.models.qualify_api import _call_reply
    from mlxctl.models.qualify_http import Refused

    class Server:
        def __init__(self, refusal):
            self.refusal, self.sent = refusal, []

        def post(self, path, body):
            self.sent.append(body["tool_choice"])
            if isinstance(body["tool_choice"], dict) and self.refusal:
                raise Refused(*self.refusal)
            return {"choices": [{"message": {"content": "ok"}}]}

    refusing = Server(("tool_choice=named needs constrained decoding, which this format does not support", 400))
    choice, how = _call_reply(refusing, MODEL, [{"role": "user", "content": "?"}], SMALL)
    assert how == "unforced" and refusing.sent[-1] == "auto" and choice["message"]["content"] == "ok"
    forcing = Server(None)
    assert _call_reply(forcing, MODEL, [], SMALL)[1] == "forced" and len(forcing.sent) == 1
    for refusal in (("out of memory", 500), ("the model is busy", 400)):
        with pytest.raises(Refused):
            _call_reply(Server(refusal), MODEL, [], SMALL)
