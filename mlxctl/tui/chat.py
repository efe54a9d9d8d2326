"""`mlxctl chat`: a terminal chat with a model, in this process or through a running daemon.

:class:`ChatApp` takes a backend (:mod:`mlxctl.tui.chat_backend`): ``EngineBackend`` (an engine
here, started on ``--model`` or handed in already started) or ``DaemonBackend`` (``--url``).
Answers stream into the transcript as Markdown (one ``MarkdownStream`` per answer, so only the
last block is re-rendered as tokens arrive); reasoning goes into a collapsed ``Collapsible``;
tool calls are shown as such. The conversation (:mod:`mlxctl.tui.conversation`) is saved and
loaded as JSON. Keys are in :data:`KEYS`, the footer and the help screen (F1). Images for a
vision model (``--image``, ``/image PATH``, F4) are :mod:`mlxctl.tui.chat_attach`'s part.

This module is the app: its layout, style, keys and event handlers. The rest is in mixins and
widgets: :mod:`~mlxctl.tui.chat_widgets` (the transcript's turns), :mod:`~mlxctl.tui.chat_panels`
(keys, help and path screens, the settings panel), :mod:`~mlxctl.tui.chat_connect` (the backend,
models, header and status lines), :mod:`~mlxctl.tui.chat_answer` (sending and streaming an
answer) and :mod:`~mlxctl.tui.chat_actions` (regenerate, edit, copy, new, save, load).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Input, Select, Static
from textual.worker import Worker

from mlxctl.tui.chat_actions import ConversationActions
from mlxctl.tui.chat_answer import Answering
from mlxctl.tui.chat_attach import ImageAttaching
from mlxctl.tui.chat_backend import Backend, BackendError, Done
from mlxctl.tui.chat_connect import Connection
from mlxctl.tui.chat_images import Attachment
from mlxctl.tui.chat_panels import KEYS, HelpScreen, PathScreen, SettingsPanel, settings_fields
from mlxctl.tui.chat_widgets import AssistantTurn, UserTurn
from mlxctl.tui.conversation import Conversation

__all__ = ["KEYS", "AssistantTurn", "ChatApp", "HelpScreen", "PathScreen", "UserTurn"]

DEFAULT_FILE = "chat.json"
HINT = "Type a message, enter sends it · F1 keys · F2 settings"


class ChatApp(ImageAttaching, Answering, ConversationActions, SettingsPanel, Connection, App[None]):
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
    #sampling { height: auto; padding: 0 1; color: $text-muted; background: $boost; }
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
                yield from settings_fields(self.conversation, self.backend)
        yield Static(Text(""), id="status")
        yield Static(Text(""), id="sampling")
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

    # -- models -----------------------------------------------------------------------------

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
        self._show_sampling()

    @on(Input.Submitted, "#model-input")
    def _model_entered(self, event: Input.Submitted) -> None:
        name = event.value.strip()
        if not name or name == self.backend.model and self.ready:
            return
        if self.busy_reason:
            self.notify(f"wait: {self.busy_reason}", severity="warning")
            return
        self.run_worker(self._switch_model(name), group="connect")

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

    @on(Input.Changed, "#settings Input")
    def _setting_changed(self, event: Input.Changed) -> None:
        event.input.remove_class("-invalid")
        if event.input.id in ("temperature", "top_p") and self.ready and (settings := self._settings(quiet=True)):
            self._show_sampling(settings)

    # -- actions ----------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_stop(self) -> None:
        if self.answering is not None:
            self.answering.cancel()
