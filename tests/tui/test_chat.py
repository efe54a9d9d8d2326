"""`mlxctl chat` (ChatApp) driven by Textual's pilot: in-process on the shared SmolLM2 engine,
and through a real daemon (tests/server fixtures). Greedy, a few tokens per answer.

Set MLXCTL_CHAT_SCREENSHOTS=docs/img to refresh the screenshots of docs/tui.md.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Collapsible, Input, Markdown, Select, TextArea

from mlxctl.server.runner import free_port
from mlxctl.tui.chat import AssistantTurn, ChatApp, HelpScreen, PathScreen, UserTurn
from mlxctl.tui.chat_backend import DaemonBackend, EngineBackend
from mlxctl.tui.conversation import ChatSettings, Conversation
from tests.cli.helpers import REPO, clean_env

MODEL = "smollm2-135m"
SIZE = (100, 30)
GREEDY = ChatSettings(temperature=0.0, max_tokens=6)
pytestmark = pytest.mark.timeout(120)


async def until(pilot, predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(0.05)
    return bool(predicate())


def idle(app: ChatApp):
    return lambda: app.ready and app.busy_reason is None and app.answering is None


async def send(pilot, app: ChatApp, text: str) -> dict:
    """Type ``text`` in the prompt, press enter, wait for the answer; the answer's message."""
    assert await until(pilot, idle(app)), app.status_text
    before = len(app.conversation.messages)
    app.query_one("#prompt", Input).focus()
    app.query_one("#prompt", Input).value = text
    await pilot.press("enter")
    assert await until(pilot, lambda: idle(app)() and len(app.conversation.messages) >= before + 2), app.status_text
    await pilot.pause()
    return app.conversation.messages[-1]


def answers(app: ChatApp) -> list[AssistantTurn]:
    return list(app.query(AssistantTurn))


def svg_text(svg: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def screenshot(app: ChatApp, tmp_path: Path, name: str) -> str:
    """Save an SVG screenshot (and copy it to $MLXCTL_CHAT_SCREENSHOTS); its visible text."""
    path = Path(app.save_screenshot(filename=name, path=str(tmp_path)))
    if target := os.environ.get("MLXCTL_CHAT_SCREENSHOTS"):
        shutil.copy(path, Path(target) / name)
    svg = path.read_text()
    assert svg.lstrip().startswith("<svg")
    return svg_text(svg)


def conversation(**settings) -> Conversation:
    return Conversation(settings=ChatSettings(**{**GREEDY.__dict__, **settings}))


# -- in-process, on the shared engine --------------------------------------------------------


@pytest.mark.asyncio
async def test_engine_streams_an_answer_into_the_transcript(smollm2_engine, tmp_path, monkeypatch):
    pieces = []
    add = AssistantTurn.add

    async def counting_add(self, delta):
        pieces.append(delta)
        await add(self, delta)

    monkeypatch.setattr(AssistantTurn, "add", counting_add)
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation(max_tokens=16))
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert MODEL in str(app.query_one("#header").content) and "in-process" in str(app.query_one("#header").content)
        reply = await send(pilot, app, "What is the capital of France?")
        assert reply["role"] == "assistant" and reply["content"].strip()
        assert len(pieces) > 1  # streamed, not all at once
        turn = answers(app)[-1]
        assert turn.query_one(".content", Markdown).source == reply["content"]
        assert not turn.query(Collapsible)  # SmolLM2 has no reasoning format
        status = app.status_text
        done = app.last_done
        assert 1 < done.completion_tokens <= 16 and done.ttft_s > 0 and done.tokens_per_s > 0
        assert status.startswith(MODEL) and "TTFT" in status and "tok/s" in status
        assert f"{done.completion_tokens} tokens · {done.finish_reason}" in status

        await pilot.press("f3")  # copy the last answer
        assert app.clipboard == reply["content"]
        shown = screenshot(app, tmp_path, "chat.svg")
    for text in ("mlxctl chat", MODEL, "in-process", "you", "What is the capital of France?", "assistant",
                 "TTFT", "tok/s", "Help", "Settings", "Regen", "Edit", "Copy", "Save", "Open"):
        assert text in shown, text


@pytest.mark.asyncio
async def test_settings_panel_changes_what_is_sent(smollm2_engine, tmp_path):
    app = ChatApp(EngineBackend(engine=smollm2_engine), Conversation())  # default settings
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert not app.query_one("#settings").display
        await pilot.press("f2")
        assert app.query_one("#settings").display and app.focused is app.query_one("#temperature")
        await pilot.press("home", "ctrl+k", "0")  # clear the field, type 0: greedy
        app.query_one("#max_tokens", Input).value = "3"
        app.query_one("#seed", Input).value = "7"
        app.query_one("#system", TextArea).text = "You are terse."
        await pilot.pause()
        shown = screenshot(app, tmp_path, "chat-settings.svg")
        await pilot.press("f2")
        assert not app.query_one("#settings").display and app.focused is app.query_one("#prompt")

        await send(pilot, app, "Say hello.")
        assert app.last_done.completion_tokens == 3 and app.last_done.finish_reason == "length"
        assert app.conversation.settings == ChatSettings(temperature=0.0, top_p=None, max_tokens=3, seed=7)
        assert app.conversation.request_messages()[0] == {"role": "system", "content": "You are terse."}
        assert "3 tokens" in app.status_text

        app.query_one("#temperature", Input).value = "5"  # out of range: refused, nothing sent
        app.query_one("#prompt", Input).value = "again"
        await pilot.press("enter")
        await pilot.pause()
        assert "temperature must be between 0 and 2" in app.status_text
        assert len(app.conversation.messages) == 2
    for text in ("System prompt", "Temperature", "top_p", "max_tokens", "seed", "Model", MODEL):
        assert text in shown, text


@pytest.mark.asyncio
async def test_regenerate_edit_and_stop(smollm2_engine):
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation())
    async with app.run_test(size=SIZE) as pilot:
        first = await send(pilot, app, "Name a colour.")
        await pilot.press("ctrl+r")  # greedy: the same answer again, in place of the old one
        assert await until(pilot, lambda: idle(app)() and len(app.conversation.messages) == 2
                           and app.last_done is not None and len(answers(app)) == 1)
        assert app.conversation.messages[-1]["content"] == first["content"]
        assert len(app.query(UserTurn)) == 1

        await pilot.press("ctrl+l")  # edit: the message is back in the prompt, the turn is gone
        await pilot.pause()
        assert app.query_one("#prompt", Input).value == "Name a colour."
        assert app.conversation.messages == [] and not app.query(UserTurn) and not answers(app)

        app.query_one("#max_tokens", Input).value = "200"  # resend it edited; esc stops the answer part-way
        app.query_one("#prompt", Input).value = "Write a long story about a dragon."
        await pilot.press("enter")
        assert await until(pilot, lambda: len(answers(app)) == 1 and answers(app)[-1].content)
        await pilot.press("escape")
        assert await until(pilot, idle(app))
        turn = answers(app)[-1]
        assert turn.border_subtitle == "stopped" and "stopped" in app.status_text
        assert app.conversation.messages == [{"role": "user", "content": "Write a long story about a dragon."},
                                             {"role": "assistant", "content": turn.content}]  # what it said is kept
        assert await until(pilot, lambda: smollm2_engine.stats()["batch_size"] == 0)  # the engine let go of it


@pytest.mark.asyncio
async def test_save_then_load_a_conversation(smollm2_engine, tmp_path):
    path = tmp_path / "saved" / "talk.json"
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation(seed=3))
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#system", TextArea).text = "Be brief."
        reply = await send(pilot, app, "Hi there")
        await pilot.press("ctrl+s")
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        assert app.screen.query_one("#path", Input).value == "chat.json"
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        assert await until(pilot, lambda: path.exists())
        assert f"saved 2 messages to {path}" in app.status_text
    saved = json.loads(path.read_text())
    assert saved["format"] == "mlxctl-chat" and saved["model"] == MODEL and saved["system"] == "Be brief."
    assert saved["settings"] == {"temperature": 0.0, "top_p": None, "max_tokens": 6, "seed": 3}
    assert saved["messages"] == [{"role": "user", "content": "Hi there"}, reply]
    assert Conversation.load(path).to_json() == saved

    app = ChatApp(EngineBackend(engine=smollm2_engine), Conversation())  # a fresh app loads it
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        await pilot.press("ctrl+o")
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        assert await until(pilot, lambda: len(answers(app)) == 1)
        assert answers(app)[0].query_one(".content", Markdown).source == reply["content"]
        assert app.conversation.messages == saved["messages"]
        assert app.query_one("#system", TextArea).text == "Be brief."
        assert app.query_one("#seed", Input).value == "3" and app.query_one("#max_tokens", Input).value == "6"
        await pilot.press("ctrl+o")  # a bad file is a message
        assert await until(pilot, lambda: isinstance(app.screen, PathScreen))
        app.screen.query_one("#path", Input).value = str(tmp_path / "missing.json")
        await pilot.press("enter")
        assert await until(pilot, lambda: "no such file" in app.status_text)
        assert app.conversation.messages[-1] == reply


@pytest.mark.asyncio
async def test_help_screen(smollm2_engine, tmp_path):
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        assert await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        shown = screenshot(app, tmp_path, "chat-help.svg")
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        app.query_one("#transcript").focus()  # away from the prompt, ? opens it too
        await pilot.press("question_mark")
        assert await until(pilot, lambda: isinstance(app.screen, HelpScreen))
    for text in ("keys", "ctrl+r", "answer the last message again", "ctrl+l", "ctrl+s",
                 "ctrl+o", "f2", "f3", "esc", "TTFT"):
        assert text in shown, text


@pytest.mark.asyncio
async def test_reasoning_is_collapsed_and_expandable(smollm2_engine):
    # deepseek_r1 starts in reasoning: everything SmolLM2 writes (no </think>) is reasoning
    app = ChatApp(EngineBackend(engine=smollm2_engine, reasoning_parser="deepseek_r1"), conversation())
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert "reasoning: deepseek_r1" in str(app.query_one("#header").content)
        reply = await send(pilot, app, "Why is the sky blue?")
        assert reply["reasoning_content"] and reply["content"] == ""
        box = answers(app)[0].query_one(Collapsible)
        assert box.collapsed and box.title == "Reasoning"
        assert box.query_one(".reasoning", Markdown).source == reply["reasoning_content"]
        await pilot.click(box.query_one("CollapsibleTitle"))
        assert await until(pilot, lambda: not box.collapsed)
        assert "reasoning_content" not in app.conversation.request_messages()[-1]  # stays local


@pytest.mark.asyncio
async def test_switching_to_a_model_that_does_not_load_keeps_the_old_one(smollm2_engine):
    app = ChatApp(EngineBackend(engine=smollm2_engine), conversation())
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        await pilot.press("f2")
        model = app.query_one("#model-input", Input)
        assert model.value == MODEL
        model.value = "/nonexistent/model-folder"
        model.focus()
        await pilot.press("enter")
        assert await until(pilot, lambda: "no such file or folder" in app.status_text)
        assert "still chatting with " + MODEL in app.status_text
        assert app.backend.model == MODEL and model.value == MODEL and app.backend.engine is smollm2_engine


# -- through a daemon ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_daemon_streams_and_switches_models(serve, tmp_path):
    url = serve(aliases=("other-name",))
    app = ChatApp(DaemonBackend(url, model="not-served"), conversation())
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, idle(app))
        assert app.backend.model == MODEL  # a --model the daemon lacks: its first one, and a warning
        assert url in str(app.query_one("#header").content)
        select = app.query_one("#model-select", Select)
        assert select.value == MODEL
        reply = await send(pilot, app, "What is two plus two?")
        assert reply["content"].strip() and app.last_done.completion_tokens == 6
        assert app.last_done.ttft_s > 0 and "TTFT" in app.status_text
        assert answers(app)[-1].query_one(".content", Markdown).source == reply["content"]

        select.value = "other-name"  # pick another model the daemon serves
        assert await until(pilot, lambda: app.backend.model == "other-name")
        assert "other-name" in str(app.query_one("#header").content)
        app.query_one("#max_tokens", Input).value = "2"
        await send(pilot, app, "And three plus three?")
        assert app.last_done.completion_tokens == 2 and app.last_done.finish_reason == "length"
        shown = screenshot(app, tmp_path, "chat-daemon.svg")
    assert url in shown and "other-name" in shown and "2 tokens" in shown


@pytest.mark.asyncio
async def test_daemon_reasoning_content_goes_to_the_collapsible(serve, tmp_path):
    url = serve(reasoning_parser="deepseek_r1")
    app = ChatApp(DaemonBackend(url), conversation(max_tokens=8))
    async with app.run_test(size=SIZE) as pilot:
        reply = await send(pilot, app, "Why is the sky blue?")
        assert reply["reasoning_content"] and not reply["content"]
        box = answers(app)[0].query_one(Collapsible)
        assert box.collapsed
        box.collapsed = False
        await pilot.pause()
        shown = screenshot(app, tmp_path, "chat-reasoning.svg")
    assert "Reasoning" in shown and reply["reasoning_content"].split()[0] in shown


@pytest.mark.asyncio
async def test_dead_url_is_a_message_and_a_loaded_conversation_shows_tool_calls(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    saved = tmp_path / "tools.json"
    saved.write_text(json.dumps([
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is **18 C** and sunny."},
    ]))
    app = ChatApp(DaemonBackend(url), Conversation.load(saved))
    async with app.run_test(size=SIZE) as pilot:
        expected = f"nothing is listening at {url}"
        assert await until(pilot, lambda: expected in app.status_text)
        assert app.is_running and not app.ready
        assert app.conversation.system == "You can call tools."
        calls = answers(app)[0].query_one(".calls")
        assert calls.display and "tool call get_weather" in str(calls.content) and "Paris" in str(calls.content)
        app.query_one("#prompt", Input).value = "hello?"  # sending retries, and says so again
        await pilot.press("enter")
        assert await until(pilot, lambda: app.busy_reason is None and expected in app.status_text)
        assert app.query_one("#prompt", Input).value == "hello?" and len(app.conversation.messages) == 4
        shown = screenshot(app, tmp_path, "chat-disconnected.svg")
    assert expected in shown and "get_weather" in shown and "18 C" in shown


# -- the pieces, without a model -------------------------------------------------------------


def test_conversation_json_round_trip_and_openai_lists(tmp_path):
    conv = Conversation.from_json([{"role": "developer", "content": "sys"},
                                   {"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert conv.system == "sys" and conv.messages == [{"role": "user", "content": "hi"}]
    assert conv.request_messages() == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    path = conv.save(tmp_path / "c.json")
    assert Conversation.load(path) == conv
    for bad, message in (({"messages": [{"role": "bot"}]}, "role must be one of"),
                         ({"messages": [], "settings": {"temperature": 9}}, "temperature must be"),
                         ({"nope": 1}, "not a conversation")):
        with pytest.raises(Exception, match=message):
            Conversation.from_json(bad)


def test_cli_chat_without_a_terminal_is_a_clear_error(tmp_path):
    def chat(*args):
        return subprocess.run([sys.executable, "-m", "mlxctl", "chat", *args], check=False, cwd=REPO,
                              env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)

    result = chat("--url", "http://127.0.0.1:9")
    assert result.returncode == 4
    assert result.stderr.startswith("mlxctl: error: 'chat' needs a terminal")
    assert "Traceback" not in result.stderr
    (tmp_path / "bad.json").write_text("{")
    result = chat("--load", str(tmp_path / "bad.json"))
    assert result.returncode == 4 and "is not JSON" in result.stderr and "Traceback" not in result.stderr
