"""Images in `mlxctl chat`: attached with --image (ChatApp's ``images``), ``/image PATH`` and F4,
sent in-process to the LLaVA-layout test model's engine (tests/vision) and as data URLs to a
real daemon on it; shown as ``[image: NAME W×H]``; kept by path and SHA-256 in saved files."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from textual.widgets import Input, Static

from mlxctl.errors import BadInputError
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from mlxctl.tui.chat import AssistantTurn, ChatApp, PathScreen, UserTurn
from mlxctl.tui.chat_backend import DaemonBackend, EngineBackend
from mlxctl.tui.chat_images import load_conversation, read_attachment
from tests.cli.helpers import REPO, clean_env
from tests.tui.test_chat import SIZE, conversation, idle, send, svg_text, until
from tests.vision.build_model import TOKENS_PER_IMAGE
from tests.vision.conftest import llava_dir, llava_loaded, png_bytes, vision_engine  # noqa: F401

pytestmark = pytest.mark.timeout(180)
NO_IMAGES = "this model does not accept images: it is a text-only model"


def picture(tmp_path, name: str, seed: int, size=(80, 60), fmt="PNG"):
    """A seeded random image file (a seed no other test uses, so the feature cache misses it)."""
    path = tmp_path / name
    path.write_bytes(png_bytes(seed, size, fmt))
    return path


def encoded(engine) -> int:
    return engine.stats()["vision"]["images_encoded"]


def notes(app: ChatApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def attached(app: ChatApp) -> str:
    bar = app.query_one("#attached", Static)
    return str(bar.content) if bar.display else ""


def image_lines(app: ChatApp) -> list[list[str]]:
    return [turn.images for turn in app.query(UserTurn)]


async def type_in(pilot, app: ChatApp, text: str) -> None:
    prompt = app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")
    await pilot.pause()


@pytest.fixture
def vision_url(vision_engine):  # noqa: F811
    server = BackgroundServer(init_app(vision_engine, ServeSettings(model_name="llava-test"))).start()
    yield server.url
    server.stop()


@pytest.mark.asyncio
async def test_in_process_images_from_the_flag_and_the_command(vision_engine, tmp_path, monkeypatch):  # noqa: F811
    a = picture(tmp_path, "a.png", 101)
    b = picture(tmp_path, "b.jpg", 102, (64, 64), "JPEG")
    pieces = []
    add = AssistantTurn.add

    async def counting_add(self, delta):
        pieces.append(delta)
        await add(self, delta)

    monkeypatch.setattr(AssistantTurn, "add", counting_add)
    app = ChatApp(EngineBackend(engine=vision_engine), conversation(max_tokens=8),
                  images=[read_attachment(a, f"--image {a}")])
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert "[image: a.png 80×60]" in attached(app)
        before = encoded(vision_engine)
        reply = await send(pilot, app, "What is in this picture?")
        assert reply["content"].strip() and len(pieces) > 1  # streamed
        sha = hashlib.sha256(a.read_bytes()).hexdigest()
        assert app.conversation.messages[0] == {"role": "user", "content": "What is in this picture?",
                                                "images": [{"path": str(a), "sha256": sha, "width": 80, "height": 60}]}
        assert image_lines(app) == [["[image: a.png 80×60]"]] and attached(app) == ""
        assert encoded(vision_engine) == before + 1
        assert app.last_done.prompt_tokens > TOKENS_PER_IMAGE

        await type_in(pilot, app, f"/image {b}")
        assert app.query_one("#prompt", Input).value == ""
        assert "[image: b.jpg 64×64]" in attached(app) and "attached [image: b.jpg 64×64] to the next message" in notes(app)
        await send(pilot, app, "And this one?")
        assert [m.get("images", [{}])[0].get("path") for m in app.conversation.messages[::2]] == [str(a), str(b)]
        assert image_lines(app) == [["[image: a.png 80×60]"], ["[image: b.jpg 64×64]"]]
        assert encoded(vision_engine) == before + 2  # a.png again: its features were cached
        assert app.last_done.prompt_tokens > 2 * TOKENS_PER_IMAGE

        await pilot.press("ctrl+l")  # edit and resend: the image goes back to the attachments
        await pilot.pause()
        assert app.query_one("#prompt", Input).value == "And this one?" and "b.jpg" in attached(app)
        await type_in(pilot, app, "/detach")
        assert attached(app) == "" and "dropped 1 image(s)" in notes(app)
        shown = svg_text(app.export_screenshot())
    assert "[image: a.png 80×60]" in shown


@pytest.mark.asyncio
async def test_bad_files_and_a_text_only_model_are_messages(smollm2_engine, tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    a = picture(tmp_path, "a.png", 103)
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation())
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        await type_in(pilot, app, f"/image {tmp_path / 'nope.png'}")
        assert f"/image: no such file: {tmp_path / 'nope.png'}" in notes(app)
        assert app.query_one("#prompt", Input).value == f"/image {tmp_path / 'nope.png'}"  # kept to fix
        await type_in(pilot, app, f"/image {tmp_path / 'notes.txt'}")
        assert "not a decodable image" in app.status_text and attached(app) == ""

        await pilot.press("f4")  # the key: a path prompt
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(a)
        await pilot.press("enter")
        assert await until(pilot, lambda: "a.png" in attached(app))

        await type_in(pilot, app, "Describe it.")  # a text-only model: the engine's message, nothing sent
        assert NO_IMAGES in app.status_text and app.conversation.messages == []
        assert app.query_one("#prompt", Input).value == "Describe it." and "a.png" in attached(app)
        await type_in(pilot, app, "/detach")
        await send(pilot, app, "Describe it.")  # without the image it answers
        assert app.conversation.messages[0] == {"role": "user", "content": "Describe it."}


@pytest.mark.asyncio
async def test_save_and_load_keep_the_images(vision_engine, tmp_path):  # noqa: F811
    a = picture(tmp_path, "a.png", 104)
    path = tmp_path / "talk.json"
    app = ChatApp(EngineBackend(engine=vision_engine), conversation(),
                  images=[read_attachment(a, "--image")])
    async with app.run_test(size=SIZE) as pilot:
        first = await send(pilot, app, "What is this?")
        await pilot.press("ctrl+s")
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        assert await until(pilot, path.exists)
    saved = json.loads(path.read_text())
    ref = {"path": str(a), "sha256": hashlib.sha256(a.read_bytes()).hexdigest(), "width": 80, "height": 60}
    assert saved["messages"] == [{"role": "user", "content": "What is this?", "images": [ref]}, first]
    assert load_conversation(path).messages == saved["messages"]

    app = ChatApp(EngineBackend(engine=vision_engine), conversation())  # ctrl+o in a fresh app
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        await pilot.press("ctrl+o")
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        assert await until(pilot, lambda: len(app.query(UserTurn)) == 1)
        assert image_lines(app) == [["[image: a.png 80×60]"]] and app.conversation.messages == saved["messages"]
        before = encoded(vision_engine)
        await send(pilot, app, "Tell me more.")  # the image is read from its file and sent again
        with_image = app.last_done.prompt_tokens
        assert with_image > TOKENS_PER_IMAGE and encoded(vision_engine) == before

    a.write_bytes(png_bytes(105))  # the picture changed: left out, and said
    app = ChatApp(EngineBackend(engine=vision_engine), load_conversation(path))  # as --load does
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert any("changed since the conversation was saved" in n for n in notes(app))
        a.unlink()  # gone: a load says so, and the chat goes on without it
        await pilot.press("ctrl+o")
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        expected = f"image a.png is left out of what is sent: no such file: {a}"
        assert await until(pilot, lambda: expected in notes(app))
        assert image_lines(app) == [[f"[image: a.png 80×60 — left out: no such file: {a}]"]]
        reply = await send(pilot, app, "Tell me more.")  # the same conversation, less the image
        assert reply["content"].strip() and app.last_done.prompt_tokens <= with_image - TOKENS_PER_IMAGE


@pytest.mark.asyncio
async def test_daemon_gets_data_urls(vision_url, serve, vision_engine, tmp_path):  # noqa: F811
    a = picture(tmp_path, "a.webp", 106, (70, 50), "WEBP")
    app = ChatApp(DaemonBackend(vision_url), conversation(), images=[read_attachment(a, "--image")])
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        before = encoded(vision_engine)
        reply = await send(pilot, app, "What is in this picture?")
        assert reply["content"].strip() and app.last_done.completion_tokens == 6
        assert app.last_done.prompt_tokens > TOKENS_PER_IMAGE and encoded(vision_engine) == before + 1
        assert image_lines(app) == [["[image: a.webp 70×50]"]]

    app = ChatApp(DaemonBackend(serve()), conversation(), images=[read_attachment(a, "--image")])  # text-only
    async with app.run_test(size=SIZE) as pilot:
        await send_failing(pilot, app, "What is this?")
        assert "HTTP 400" in app.status_text and "this model does not accept images" in app.status_text


async def send_failing(pilot, app: ChatApp, text: str) -> None:
    assert await until(pilot, idle(app)), app.status_text
    await type_in(pilot, app, text)
    assert await until(pilot, lambda: idle(app)() and app.last_error is not None), app.status_text


def test_saved_references_are_checked(tmp_path):
    ref = {"path": "/x/a.png", "sha256": "ab" * 32, "width": 8, "height": 8}
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": "hi", "images": [ref]},
                                {"role": "assistant", "content": "yo"}]))
    conv = load_conversation(path)
    assert conv.system == "s" and conv.messages[0]["images"] == [ref] and "images" not in conv.messages[1]
    path.write_text(json.dumps([{"role": "user", "content": "hi", "images": [{"path": "/x/a.png"}]}]))
    with pytest.raises(BadInputError, match=r"messages\[0\].images\[0\] needs a path and a sha256"):
        load_conversation(path)


def test_cli_image_errors_are_one_line(tmp_path):
    def chat(*args):
        return subprocess.run([sys.executable, "-m", "mlxctl", "chat", "--url", "http://127.0.0.1:9", *args],
                              check=False, cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)

    missing = tmp_path / "nope.png"
    result = chat("--image", str(missing))
    assert result.returncode == 4
    assert result.stderr.strip().splitlines() == [f"mlxctl: error: --image {missing}: no such file: {missing}"]
    (tmp_path / "notes.txt").write_text("not an image")
    result = chat("--image", str(tmp_path / "notes.txt"))
    assert result.returncode == 4 and "not a decodable image" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    picture(tmp_path, "a.png", 107)
    result = chat("--image", str(tmp_path / "a.png"))  # a good image gets as far as the terminal check
    assert result.returncode == 4 and "'chat' needs a terminal" in result.stderr
