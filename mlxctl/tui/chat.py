"""`mlxctl chat`: a terminal chat with a model, in this process or through a running daemon.

:class:`ChatApp` takes a backend (:mod:`mlxctl.tui.chat_backend`): ``EngineBackend`` (an engine
here, started on ``--model`` or handed in already started) or ``DaemonBackend`` (``--url``).
Answers stream into the transcript as Markdown (one ``MarkdownStream`` per answer, so only the
last block is re-rendered as tokens arrive); reasoning goes into a collapsed ``Collapsible``;
tool calls are shown as such. The conversation (:mod:`mlxctl.tui.conversation`) is saved and
loaded as JSON. Keys are in :data:`KEYS`, the footer and the help screen (F1). Images for a
vision model (``--image``, ``/image PATH``, F4) are :mod:`mlxctl.tui.chat_attach`'s part.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from contextlib import aclosing
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Collapsible, Footer, Input, Label, Markdown, Select, Static, TextArea
from textual.worker import Worker

from mlxctl.errors import MlxctlError
from mlxctl.tui import fmt
from mlxctl.tui.chat_attach import USAGE, ImageAttaching
from mlxctl.tui.chat_backend import Backend, BackendError, CallDelta, Delta, Done
from mlxctl.tui.chat_images import Attachment, load_conversation
from mlxctl.tui.chat_vision import stream as stream_with_images
from mlxctl.tui.conversation import ChatSettings, Conversation

# (keys, action, footer label, help text); the footer shows the first key of each
KEYS = (
    ("f1,question_mark", "help", "Help", "this help (? works when the prompt is not focused)"),
    ("f2", "toggle_settings", "Settings", "show or hide the settings: system prompt, sampling, model"),
    ("ctrl+r", "regenerate", "Regen", "answer the last message again"),
    ("ctrl+l", "edit_last", "Edit", "put the last message back in the prompt to edit and resend it"),
    ("f3", "copy_answer", "Copy", "copy the last answer to the clipboard"),
    ("ctrl+s", "save", "Save", "save the conversation as JSON"),
    ("ctrl+o", "load", "Open", "load a conversation from JSON"),
    ("ctrl+n", "new", "New", "start a new conversation (the system prompt and settings stay)"),
    ("escape", "stop", "Stop", "stop the answer being written"),
    ("ctrl+q", "quit", "Quit", "quit"),
    ("f4", "attach_image", "Image", "attach an image to the next message (or type /image PATH; /detach drops them)"),
)
DEFAULT_FILE = "chat.json"
HINT = "Type a message, enter sends it · F1 keys · F2 settings"


def _key_label(keys: str) -> str:
    names = {"question_mark": "?", "escape": "esc"}
    return " / ".join(names.get(k, k) for k in keys.split(","))


# -- transcript widgets ------------------------------------------------------------------------


class UserTurn(Vertical):
    """A user's (or a tool result's) message; ``images``: a line for each image it carries."""

    def __init__(self, text: str, role: str = "user", images: Sequence[str] = ()):
        super().__init__(classes=f"turn {role}")
        self.text = text
        self.images = list(images)
        self.border_title = "you" if role == "user" else "tool result"

    def compose(self) -> ComposeResult:
        if self.images:
            yield Static(Text("\n".join(self.images)), classes="images")
        yield Markdown(self.text, classes="content")


class AssistantTurn(Vertical):
    """One answer: reasoning (collapsed), the content as Markdown, tool calls; streamed or whole."""

    def __init__(self, message: dict | None = None):
        super().__init__(classes="turn assistant")
        self.border_title = "assistant"
        message = message or {}
        self.reasoning = message.get("reasoning_content") or ""
        self.content = message.get("content") or ""
        self.calls: list[dict] = [dict(c) for c in message.get("tool_calls") or ()]
        self._content_stream = None
        self._reasoning_stream = None

    def compose(self) -> ComposeResult:
        if self.reasoning:
            yield Collapsible(Markdown(self.reasoning, classes="reasoning"), title="Reasoning", collapsed=True)
        yield Markdown(self.content, classes="content")
        yield Static(calls_text(self.calls), classes="calls")

    def on_mount(self) -> None:
        self.query_one(".calls").display = bool(self.calls)

    # streaming

    async def add(self, delta: Delta) -> None:
        if delta.reasoning:
            if self._reasoning_stream is None:
                if not self.query(Collapsible):
                    box = Collapsible(Markdown(classes="reasoning"), title="Reasoning …", collapsed=True)
                    await self.mount(box, before=self.query_one(".content"))
                self._reasoning_stream = Markdown.get_stream(self.query_one(".reasoning", Markdown))
            self.reasoning += delta.reasoning
            await self._reasoning_stream.write(delta.reasoning)
        if delta.content:
            if self._content_stream is None:
                self._content_stream = Markdown.get_stream(self.query_one(".content", Markdown))
            self.content += delta.content
            await self._content_stream.write(delta.content)
        if delta.calls:
            merge_calls(self.calls, delta.calls)
            calls = self.query_one(".calls", Static)
            calls.update(calls_text(self.calls))
            calls.display = True

    async def finish(self, note: str | None = None) -> None:
        """Flush the Markdown streams; ``note`` (stopped, an error) goes under the answer."""
        for stream in (self._reasoning_stream, self._content_stream):
            if stream is not None:
                await stream.stop()
        self._reasoning_stream = self._content_stream = None
        for box in self.query(Collapsible):
            box.title = "Reasoning"
        if note:
            self.border_subtitle = note

    def message(self) -> dict:
        out: dict = {"role": "assistant", "content": self.content}
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        if self.calls:
            out["tool_calls"] = [{"id": c.get("id") or f"call_{i}", "type": "function",
                                  "function": {"name": c["function"]["name"],
                                               "arguments": c["function"]["arguments"]}}
                                 for i, c in enumerate(self.calls)]
        return out


def merge_calls(calls: list[dict], deltas: list[CallDelta]) -> None:
    """Fold streamed call fragments into whole OpenAI-shaped calls, by index."""
    for d in deltas:
        while len(calls) <= d.index:
            calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        call = calls[d.index]
        if d.id:
            call["id"] = d.id
        if d.name:
            call["function"]["name"] = d.name
        call["function"]["arguments"] += d.arguments


def calls_text(calls: list[dict]) -> Text:
    text = Text()
    for call in calls:
        fn = call.get("function") or {}
        if text:
            text.append("\n")
        text.append("tool call ", style="bold")
        text.append(str(fn.get("name") or "?"), style="bold magenta")
        text.append(f" {fn.get('arguments') or '{}'}")
    return text


def stats_text(done: Done) -> str:
    parts = []
    if done.ttft_s is not None:
        parts.append(f"TTFT {done.ttft_s * 1000:,.0f} ms")
    if done.tokens_per_s is not None:
        parts.append(fmt.rate(done.tokens_per_s))
    if done.completion_tokens is not None:
        parts.append(f"{done.completion_tokens} tokens")
    if done.finish_reason:
        parts.append(done.finish_reason)
    return " · ".join(parts)


# -- screens -----------------------------------------------------------------------------------


class HelpScreen(ModalScreen[None]):
    """The keys, and what the panels are."""

    BINDINGS: ClassVar = [Binding("escape,f1,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold dark_orange", no_wrap=True)
        table.add_column()
        table.add_row("enter", "send the message in the prompt")
        for keys, _, _, text in KEYS:
            table.add_row(_key_label(keys), text)
        table.add_row("tab", "move between the prompt, the transcript and the settings")
        table.add_row("/image PATH", USAGE.removeprefix("/image PATH "))
        with Vertical(id="help"):
            yield Static(table)
            yield Static("Click Reasoning (or focus it and press enter) to expand a model's thinking. "
                         "The status bar shows the last answer's time to first token (TTFT) and "
                         "tokens per second.", classes="hint")
            yield Static("esc closes this help", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "mlxctl chat: keys"


class PathScreen(ModalScreen[str | None]):
    """Ask for a file path: enter returns it, esc cancels."""

    BINDINGS: ClassVar = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, default: str, placeholder: str = "path/to/conversation.json"):
        super().__init__()
        self.title_text, self.default, self.placeholder = title, default, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="path-box"):
            yield Label(self.title_text)
            yield Input(self.default, id="path", placeholder=self.placeholder)
            yield Label("enter: ok · esc: cancel", classes="hint")

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


# -- the app -----------------------------------------------------------------------------------


class ChatApp(ImageAttaching, App[None]):
    """Chat with one backend; ``conversation`` (e.g. from ``--load``) is shown at start, and
    ``images`` (``--image``) go with the first message sent."""

    TITLE = "mlxctl chat"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #header { height: 1; padding: 0 1; background: $primary; color: $text; text-style: bold; }
    #main { height: 1fr; }
    #transcript { width: 1fr; height: 1fr; padding: 0 1; }
    #hint { color: $text-muted; padding: 1 2; }
    .turn { height: auto; margin: 1 0 0 0; padding: 0 1; border: round $secondary; }
    .turn.user { border: round $accent; }
    .turn.tool { border: round $warning; }
    .turn Markdown { margin: 0; padding: 0; background: transparent; }
    .turn Markdown > *:last-child { margin-bottom: 0; }
    .turn.assistant Collapsible { margin: 0 0 1 0; padding-bottom: 0; background: $boost; }
    .turn.assistant .reasoning { color: $text-muted; }
    .turn .calls { color: $text; background: $boost; padding: 0 1; margin: 1 0 0 0; }
    .turn.-error { border: round $error; }
    .turn .images { color: $text-muted; }
    #attached { height: auto; padding: 0 1; color: $text-muted; background: $boost; display: none; }
    .notice { color: $error; padding: 0 1; margin: 1 0 0 0; }
    #settings { width: 40; display: none; border-left: vkey $primary; padding: 0 1; }
    #settings.-open { display: block; }
    #settings Label { margin: 1 0 0 0; color: $text-muted; }
    #settings TextArea { height: 5; }
    #settings Input { height: 1; border: none; padding: 0 1; background: $boost; }
    #settings Input:focus { background: $primary 40%; }
    #settings Input.-invalid { background: $error 50%; }
    #status { height: 1; padding: 0 1; background: $success-darken-2; color: $text; }
    #status.-busy { background: $warning-darken-2; }
    #status.-error { background: $error; }
    #prompt { margin: 0 0; }
    HelpScreen, PathScreen { align: center middle; }
    #help { width: 88; max-width: 95%; height: auto; max-height: 90%; border: round $primary;
            background: $surface; padding: 1 2; }
    #help .hint { color: $text-muted; margin: 1 0 0 0; }
    #path-box { width: 70; max-width: 95%; height: auto; border: round $primary; background: $surface;
                padding: 1 2; }
    #path-box .hint { color: $text-muted; }
    """
    BINDINGS: ClassVar = [Binding(keys, action, label) for keys, action, label, _ in KEYS]

    def __init__(self, backend: Backend, conversation: Conversation | None = None, *,
                 conversation_path: str | None = None, images: Sequence[Attachment] = (), **kwargs):
        super().__init__(**kwargs)
        self._init_images(list(images))
        self.backend = backend
        self.conversation = conversation or Conversation()
        self.path = conversation_path or DEFAULT_FILE
        self.turns: list[Vertical] = []  # one widget per conversation message (+ the answer being written)
        self.answering: Worker | None = None
        self.busy_reason: str | None = None  # "connecting", "loading a model", "answering"
        self.ready = False
        self.last_done: Done | None = None
        self.last_error: str | None = None
        self._thread = threading.get_ident()

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(self._header_text(), id="header")
        with Horizontal(id="main"):
            with VerticalScroll(id="transcript"):
                yield Static(HINT, id="hint")
            with VerticalScroll(id="settings"):
                yield Label("System prompt")
                yield TextArea(self.conversation.system, id="system", soft_wrap=True)
                s = self.conversation.settings
                yield Label("Temperature (0–2, 0 is greedy)")
                yield Input(f"{s.temperature:g}", id="temperature", type="number")
                yield Label("top_p (0–1]")
                yield Input(f"{s.top_p:g}", id="top_p", type="number")
                yield Label("max_tokens")
                yield Input(str(s.max_tokens), id="max_tokens", type="integer")
                yield Label("seed (empty: random)")
                yield Input("" if s.seed is None else str(s.seed), id="seed", type="integer")
                if self.backend.can_list_models:
                    yield Label("Model (served by the daemon)")
                    yield Select([], id="model-select", allow_blank=True, prompt="(connecting)")
                else:
                    yield Label("Model (enter loads it)")
                    yield Input(self.backend.model or "", id="model-input",
                                placeholder="catalog name, folder, .gguf or repo id")
        yield Static(Text(""), id="status")
        yield Static(Text(""), id="attached")
        yield Input(id="prompt", placeholder="Message (enter sends; /image PATH attaches a picture)")
        yield Footer()

    def on_mount(self) -> None:
        self._thread = threading.get_ident()
        self.query_one("#transcript", VerticalScroll).anchor()
        self.query_one("#prompt", Input).focus()
        self.show_pending()
        self._busy("connecting")
        self.run_worker(self._connect(), group="connect")
        if self.conversation.messages:
            self.call_later(self._rebuild)

    async def on_unmount(self) -> None:
        if self.answering is not None:
            self.answering.cancel()
        await self.backend.aclose()

    # -- connecting and models --------------------------------------------------------------

    def _progress(self, message: str) -> None:
        """A status line from any thread (the engine loads in a worker thread)."""
        if threading.get_ident() == self._thread:
            self._show_status(message, busy=True)
        else:
            self.call_from_thread(self._show_status, message, True)

    async def _connect(self) -> None:
        try:
            await self.backend.connect(self._progress)
        except BackendError as exc:
            self._idle()
            self._fail(str(exc))
            return
        await self._show_models()
        self.ready = True
        self._idle()
        self._show_status()
        if warning := getattr(self.backend, "warning", None):
            self.backend.warning = None
            self.notify(warning, severity="warning", timeout=8)

    async def _show_models(self) -> None:
        self.query_one("#header", Static).update(self._header_text())
        if self.backend.can_list_models:
            select = self.query_one("#model-select", Select)
            try:
                names = await self.backend.models()
            except BackendError as exc:
                self._fail(str(exc))
                return
            select.set_options([(n, n) for n in names])
            if self.backend.model in names:
                select.value = self.backend.model
        else:
            self.query_one("#model-input", Input).value = self.backend.model or ""

    @on(Select.Changed, "#model-select")
    async def _model_picked(self, event: Select.Changed) -> None:
        if event.value is Select.NULL or event.value == self.backend.model:
            return
        try:
            await self.backend.switch_model(str(event.value), self._progress)
        except BackendError as exc:
            self._fail(str(exc))
            return
        self.query_one("#header", Static).update(self._header_text())
        self._show_status(f"now chatting with {self.backend.model}")

    @on(Input.Submitted, "#model-input")
    def _model_entered(self, event: Input.Submitted) -> None:
        name = event.value.strip()
        if not name or name == self.backend.model and self.ready:
            return
        if self.busy_reason:
            self.notify(f"wait: {self.busy_reason}", severity="warning")
            return
        self.run_worker(self._switch_model(name), group="connect")

    async def _switch_model(self, name: str) -> None:
        self._busy("loading a model")
        self._show_status(f"loading {name} …", busy=True)
        try:
            await self.backend.switch_model(name, self._progress)
        except BackendError as exc:
            self._idle()
            self._fail(f"{exc} — still chatting with {self.backend.model or 'nothing'}")
            if self.backend.model:
                self.query_one("#model-input", Input).value = self.backend.model
            return
        await self._show_models()
        self.ready = True
        self._idle()
        self._show_status(f"now chatting with {self.backend.model}")

    # -- sending and answering --------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if (command := self.image_command(text)) is not None:
            if command:
                event.input.value = ""
            return
        if self.busy_reason:
            self.notify(f"wait: {self.busy_reason} (esc stops an answer)", severity="warning")
            return
        if self._settings() is None:
            return
        if refused := self.pending_refused():
            self._fail(f"{refused} (/detach drops the attached images)")
            return
        if not self.ready:
            if self.backend.can_list_models:  # the daemon may be up by now: try again on send
                self.run_worker(self._connect_and_send(text), group="connect")
                event.input.value = ""
            else:
                self._fail(self.last_error or "no model is loaded")
            return
        event.input.value = ""
        self.busy_reason = "answering"
        self.call_later(self._post_user, text)

    async def _connect_and_send(self, text: str) -> None:
        self._busy("connecting")
        await self._connect()
        if self.ready:
            await self._post_user(text)
        else:
            self.query_one("#prompt", Input).value = text

    async def _post_user(self, text: str) -> None:
        message: dict = {"role": "user", "content": text}
        if self.pending:
            message["images"] = self.take_pending()
        self.conversation.messages.append(message)
        await self._mount_turn(UserTurn(text, images=self.images.labels(message)))
        self._answer()

    def _answer(self) -> None:
        self._busy("answering")
        self.answering = self.run_worker(self._stream_answer(), group="answer", exclusive=True)

    async def _stream_answer(self) -> None:
        settings = self._settings()
        if settings is None:
            self._idle()
            return
        self.conversation.system = self.query_one("#system", TextArea).text
        turn = AssistantTurn()
        await self._mount_turn(turn)
        self._show_status(f"{self.backend.model} is answering … (esc stops)", busy=True)
        done: Done | None = None
        note: str | None = None
        error: str | None = None
        try:
            messages = self.conversation.request_messages()
            async with aclosing(stream_with_images(self.backend, messages, settings, self.images)) as events:
                async for event in events:
                    if isinstance(event, Done):
                        done = event
                    else:
                        await turn.add(event)
        except BackendError as exc:
            error = str(exc)
        except asyncio.CancelledError:
            note = "stopped"
            raise
        finally:
            await self._settle(turn, done, note, error)

    async def _settle(self, turn: AssistantTurn, done: Done | None, note: str | None, error: str | None) -> None:
        """Keep what an answer said (even a stopped one); drop an empty one that failed."""
        await turn.finish(note or (stats_text(done) if done else None))
        self.answering = None
        self._idle()
        said = bool(turn.content or turn.reasoning or turn.calls)
        if said:
            self.conversation.messages.append(turn.message())
        else:
            await turn.remove()
            self.turns.remove(turn)
        if error:
            if said:
                turn.add_class("-error")
            self._fail(error)
        elif done is not None:
            self.last_done = done
            self._show_status()
        else:
            self._show_status("stopped")

    def _settings(self) -> ChatSettings | None:
        """The settings panel's values, or None (and a message) when one is not valid."""
        values = {}
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            widget = self.query_one(f"#{name}", Input)
            raw = widget.value.strip()
            try:
                if name == "seed":
                    values[name] = int(raw) if raw else None
                elif name == "max_tokens":
                    values[name] = int(raw)
                else:
                    values[name] = float(raw)
            except ValueError:
                widget.add_class("-invalid")
                self._fail(f"{name} is not a number: {raw!r}")
                return None
        settings = ChatSettings(**values)
        try:
            settings.check()
        except MlxctlError as exc:
            self._fail(str(exc))
            return None
        self.conversation.settings = settings
        return settings

    @on(Input.Changed, "#settings Input")
    def _setting_changed(self, event: Input.Changed) -> None:
        event.input.remove_class("-invalid")

    # -- actions ----------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_settings(self) -> None:
        panel = self.query_one("#settings")
        panel.toggle_class("-open")
        if panel.has_class("-open"):
            self.query_one("#temperature", Input).focus()
        else:
            self.query_one("#prompt", Input).focus()

    def action_stop(self) -> None:
        if self.answering is not None:
            self.answering.cancel()

    def action_regenerate(self) -> None:
        if not self._can_edit("regenerate"):
            return
        messages = self.conversation.messages
        i = len(messages)
        while i and messages[i - 1]["role"] == "assistant":
            i -= 1
        if i == 0 or messages[i - 1]["role"] != "user":
            self.notify("nothing to regenerate: send a message first", severity="warning")
            return
        self.call_later(self._truncate_and_answer, i)

    async def _truncate_and_answer(self, keep: int) -> None:
        await self._truncate(keep)
        self._answer()

    def action_edit_last(self) -> None:
        if not self._can_edit("edit"):
            return
        i = self.conversation.last("user")
        if i is None:
            self.notify("no message to edit yet", severity="warning")
            return
        prompt = self.query_one("#prompt", Input)
        prompt.value = self.conversation.messages[i]["content"]
        self.restore_pending(self.conversation.messages[i].get("images") or [])
        prompt.focus()
        self.call_later(self._truncate, i)
        self._show_status("editing the last message: enter resends it")

    def action_copy_answer(self) -> None:
        i = self.conversation.last("assistant")
        if i is None:
            self.notify("no answer to copy yet", severity="warning")
            return
        text = self.conversation.messages[i]["content"]
        self.copy_to_clipboard(text)
        self.notify(f"copied the last answer ({len(text)} characters)")

    def action_new(self) -> None:
        if self._can_edit("start a new conversation"):
            self.call_later(self._truncate, 0)
            self.last_done = None
            self._show_status("new conversation")

    def action_save(self) -> None:
        self.push_screen(PathScreen("Save the conversation to", self.path), self._save_to)

    def action_load(self) -> None:
        if self._can_edit("load a conversation"):
            self.push_screen(PathScreen("Load a conversation from", self.path), self._load_from)

    def _save_to(self, path: str | None) -> None:
        if not path:
            return
        conv = self.conversation
        conv.system = self.query_one("#system", TextArea).text
        conv.settings = self._settings() or conv.settings
        conv.model = self.backend.model
        try:
            target = conv.save(path)
        except MlxctlError as exc:
            self._fail(str(exc))
            return
        self.path = path
        self._show_status(f"saved {len(conv.messages)} messages to {target}")

    async def _load_from(self, path: str | None) -> None:
        if not path:
            return
        try:
            conv = load_conversation(path)
        except MlxctlError as exc:
            self._fail(str(exc))
            return
        self.path = path
        self.conversation = conv
        self._fill_settings(conv)
        await self._rebuild()
        self._show_status(f"loaded {len(conv.messages)} messages from {path}")

    def _can_edit(self, what: str) -> bool:
        if self.busy_reason:
            self.notify(f"cannot {what} while {self.busy_reason} (esc stops an answer)", severity="warning")
            return False
        return True

    # -- transcript -------------------------------------------------------------------------

    async def _mount_turn(self, turn: Vertical) -> None:
        self.query_one("#hint").display = False
        await self.query_one("#transcript", VerticalScroll).mount(turn)
        self.turns.append(turn)

    async def _truncate(self, keep: int) -> None:
        """Keep the first ``keep`` messages (and their widgets); notices go too."""
        del self.conversation.messages[keep:]
        doomed, self.turns = self.turns[keep:], self.turns[:keep]
        doomed.extend(self.query(".notice"))
        for widget in doomed:
            await widget.remove()
        self.query_one("#hint").display = not self.turns

    async def _rebuild(self) -> None:
        transcript = self.query_one("#transcript", VerticalScroll)
        await transcript.remove_children([*self.turns, *self.query(".notice")])
        for problem in self.images.check(self.conversation.messages):
            self.notify(problem, severity="warning", timeout=10, markup=False)
        self.turns = [AssistantTurn(m) if m["role"] == "assistant"
                      else UserTurn(m["content"], m["role"], self.images.labels(m))
                      for m in self.conversation.messages]
        await transcript.mount_all(self.turns)
        self.query_one("#hint").display = not self.turns
        transcript.scroll_end(animate=False)

    def _fill_settings(self, conv: Conversation) -> None:
        s = conv.settings
        self.query_one("#system", TextArea).text = conv.system
        self.query_one("#temperature", Input).value = f"{s.temperature:g}"
        self.query_one("#top_p", Input).value = f"{s.top_p:g}"
        self.query_one("#max_tokens", Input).value = str(s.max_tokens)
        self.query_one("#seed", Input).value = "" if s.seed is None else str(s.seed)

    # -- status -----------------------------------------------------------------------------

    def _header_text(self) -> Text:
        model = self.backend.model or "(no model)"
        reasoning = getattr(self.backend, "reasoning_format", None)
        return Text.assemble("mlxctl chat │ ", (model, "bold"), f" │ {self.backend.where}",
                             f" │ reasoning: {reasoning}" if reasoning else "")

    def _busy(self, reason: str) -> None:
        self.busy_reason = reason
        if reason == "connecting":
            if self.backend.can_list_models:
                self._show_status(f"connecting to {self.backend.where} …", busy=True)
            else:
                self._show_status(f"loading {getattr(self.backend, 'ref', None) or 'the default model'} …", busy=True)

    def _idle(self) -> None:
        self.busy_reason = None

    def _fail(self, message: str) -> None:
        self.last_error = message
        status = self.query_one("#status", Static)
        status.set_class(True, "-error")
        status.set_class(False, "-busy")
        status.update(Text(message))
        self.notify(message, severity="error", timeout=6, markup=False)

    def _show_status(self, message: str | None = None, busy: bool = False) -> None:
        """``message``, or the ready line with the last answer's TTFT and tok/s."""
        status = self.query_one("#status", Static)
        status.set_class(busy, "-busy")
        status.set_class(False, "-error")
        if not busy:
            self.last_error = None
        line = f"{self.backend.model or '-'} · "
        if self.last_done is not None:
            line += f"last answer: {stats_text(self.last_done)}"
        else:
            line += "ready"
        status.update(Text(message if message else line) if busy else
                      Text(f"{message} · {line}" if message else line))

    @property
    def status_text(self) -> str:
        return str(self.query_one("#status", Static).content)
