"""`mlxctl chat`'s sampling: temperature and top_p unset by default, so in-process the model's
generation_config.json (else run's greedy built-ins) applies and through a daemon the fields are
left out of the request (the server's defaults); a value set in the settings panel, by a flag or
in a saved file wins. The sampling line under the status bar says what is in use and where each
value comes from. Real SmolLM2 engines, a real loopback daemon, Textual's pilot."""

from __future__ import annotations

import json

import httpx
import pytest
from textual.widgets import Input

from mlxctl.api.sampling_defaults import SamplingDefaults
from mlxctl.engine.engine import Engine
from mlxctl.models.loader import load_model
from mlxctl.tui.chat import ChatApp
from mlxctl.tui.chat_backend import DaemonBackend, EngineBackend
from mlxctl.tui.conversation import ChatSettings, Conversation
from tests.bench.fake_server import FakeServer
from tests.tui.test_chat import SIZE, idle, send, until

pytestmark = pytest.mark.timeout(120)

GENERATION_CONFIG = {"temperature": 0.6, "top_k": 20, "bos_token_id": 1}
TUNED = ("sampling: temperature=0.6 (generation_config.json) top_p=1 (default) top_k=20 (generation_config.json) "
         "min_p=0 (default) repetition_penalty=1 (default)")
SHORT = ChatSettings(max_tokens=3)  # nothing set but the length


@pytest.fixture(scope="module")
def tuned_engine(smollm2, tmp_path_factory):
    """SmolLM2 from a folder of links to its files, with a generation_config.json of its own."""
    folder = tmp_path_factory.mktemp("smol-tuned-chat")
    for item in smollm2.path.iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    engine = Engine(lambda: load_model(folder, name="smol-tuned")).start()
    yield engine
    engine.shutdown()


def recording(engine, monkeypatch) -> list:
    """The SamplingParams of every request ``engine`` is given during the test."""
    seen, submit = [], engine.submit

    def record(prompt_tokens, params, **kwargs):
        seen.append(params)
        return submit(prompt_tokens, params, **kwargs)

    monkeypatch.setattr(engine, "submit", record)
    return seen


async def type_setting(pilot, app: ChatApp, name: str, value: str) -> None:
    app.query_one(f"#{name}", Input).value = value
    await pilot.pause()


# -- in-process ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_unset_sampling_takes_generation_config_and_a_set_value_wins(tuned_engine, monkeypatch):
    submitted = recording(tuned_engine, monkeypatch)
    app = ChatApp(EngineBackend(engine=tuned_engine), Conversation(settings=SHORT))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: idle(app)() and app.sampling_text)
        assert app.sampling_text == TUNED
        assert app.query_one("#temperature", Input).value == "" and app.query_one("#top_p", Input).value == ""
        await send(pilot, app, "Hi")
        assert (submitted[-1].temperature, submitted[-1].top_p, submitted[-1].top_k) == (0.6, 1.0, 20)

        await type_setting(pilot, app, "temperature", "0")  # the line follows what is typed
        assert app.sampling_text.startswith("sampling: temperature=0 (set) top_p=1 (default) top_k=20 (generation_config.json)")
        await type_setting(pilot, app, "top_p", "0.5")
        await send(pilot, app, "Again")
        assert (submitted[-1].temperature, submitted[-1].top_p, submitted[-1].top_k) == (0.0, 0.5, 20)
        assert "top_p=0.5 (set)" in app.sampling_text
        assert app.conversation.settings == ChatSettings(temperature=0.0, top_p=0.5, max_tokens=3)


@pytest.mark.asyncio
async def test_unset_sampling_on_smollm2_is_runs_greedy_built_ins(smollm2_engine, monkeypatch):
    submitted = recording(smollm2_engine, monkeypatch)
    app = ChatApp(EngineBackend(engine=smollm2_engine), Conversation(settings=SHORT))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: idle(app)() and app.sampling_text)
        assert app.sampling_text == ("sampling: temperature=0 (default) top_p=1 (default) top_k=0 (default) "
                                     "min_p=0 (default) repetition_penalty=1 (default)")
        await send(pilot, app, "Hi")
        assert (submitted[-1].temperature, submitted[-1].top_p) == (0.0, 1.0)


@pytest.mark.asyncio
async def test_a_file_saved_by_the_old_version_keeps_its_values(tuned_engine, tmp_path):
    old = tmp_path / "old.json"  # what chat wrote when 0.7 / 1.0 were always set
    old.write_text(json.dumps({"format": "mlxctl-chat", "version": 1, "model": "smollm2-135m", "system": "",
                               "settings": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 1024, "seed": None},
                               "messages": []}))
    app = ChatApp(EngineBackend(engine=tuned_engine), Conversation(settings=SHORT))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: idle(app)() and app.sampling_text == TUNED)
        await pilot.press("ctrl+o")
        app.screen.query_one("#path", Input).value = str(old)
        await pilot.press("enter")
        assert await until(pilot, lambda: "loaded 0 messages" in app.status_text)
        assert app.sampling_text.startswith("sampling: temperature=0.7 (set) top_p=1 (set) top_k=20 (generation_config.json)")
        assert app.query_one("#temperature", Input).value == "0.7" and app.query_one("#top_p", Input).value == "1"
    assert Conversation.load(old).settings == ChatSettings(temperature=0.7, top_p=1.0, max_tokens=1024)


def test_unset_values_save_as_null_and_load_back_unset(tmp_path):
    path = Conversation(settings=ChatSettings(top_p=0.9)).save(tmp_path / "c.json")
    assert json.loads(path.read_text())["settings"] == {"temperature": None, "top_p": 0.9, "max_tokens": 1024, "seed": None}
    assert Conversation.load(path).settings == ChatSettings(top_p=0.9)
    with pytest.raises(Exception, match="top_p must be greater than 0"):
        ChatSettings.from_dict({"temperature": None, "top_p": 0})


# -- through a daemon ------------------------------------------------------------------------


class Recording(httpx.AsyncBaseTransport):
    """httpx's own transport, keeping the JSON body of every POST."""

    def __init__(self):
        self.bodies: list[dict] = []
        self._real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.bodies.append(json.loads(await request.aread()))
        return await self._real.handle_async_request(request)

    async def aclose(self) -> None:
        await self._real.aclose()


@pytest.mark.asyncio
async def test_daemon_leaves_unset_fields_out_and_shows_the_servers_defaults(serve, engine, monkeypatch):
    url = serve(sampling_defaults=SamplingDefaults(temperature=0.3, top_k=40))
    submitted = recording(engine, monkeypatch)
    transport = Recording()
    app = ChatApp(DaemonBackend(url, transport=transport), Conversation(settings=SHORT))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: idle(app)() and app.sampling_text)
        assert app.sampling_text == ("sampling: temperature=0.3 (server) top_p=1 (server) top_k=40 (server) "
                                     "min_p=0 (server) repetition_penalty=1 (server)")
        await send(pilot, app, "Hi")
        assert not {"temperature", "top_p", "seed"} & transport.bodies[-1].keys()
        assert (submitted[-1].temperature, submitted[-1].top_k) == (0.3, 40)  # the server's defaults applied

        await type_setting(pilot, app, "temperature", "0")
        assert app.sampling_text.startswith("sampling: temperature=0 (set) top_p=1 (server)")
        await send(pilot, app, "Again")
        assert transport.bodies[-1]["temperature"] == 0 and "top_p" not in transport.bodies[-1]
        assert submitted[-1].temperature == 0.0


@pytest.mark.asyncio
async def test_a_daemon_that_reports_no_sampling_defaults_says_server_defaults():
    with FakeServer() as fake:
        app = ChatApp(DaemonBackend(fake.url), Conversation(settings=SHORT))
        async with app.run_test(size=SIZE) as pilot:
            assert await until(pilot, lambda: idle(app)() and app.sampling_text)
            assert app.sampling_text == "sampling: server defaults"
            await type_setting(pilot, app, "temperature", "0")
            assert app.sampling_text == "sampling: temperature=0 (set) · others: server defaults"
            await send(pilot, app, "Hi")
