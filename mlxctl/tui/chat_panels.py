"""The panels of `mlxctl chat`: the keys table, the help and path screens, the settings panel.

:data:`KEYS` is the one table behind the app's bindings, its footer and :class:`HelpScreen`.
:class:`PathScreen` asks for a file (save, load, an image). The settings panel (F2) is
:func:`settings_fields` in the layout and :class:`SettingsPanel` (a mixin of
:class:`~mlxctl.tui.chat.ChatApp`), which reads and fills it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select, Static, TextArea

from mlxctl.errors import MlxctlError
from mlxctl.tui.chat_attach import USAGE
from mlxctl.tui.chat_backend import Backend
from mlxctl.tui.conversation import ChatSettings, Conversation

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

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


def _key_label(keys: str) -> str:
    names = {"question_mark": "?", "escape": "esc"}
    return " / ".join(names.get(k, k) for k in keys.split(","))


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


# -- the settings panel ------------------------------------------------------------------------


def settings_fields(conversation: Conversation, backend: Backend) -> ComposeResult:
    """The settings panel's contents: the system prompt, sampling, the model."""
    yield Label("System prompt")
    yield TextArea(conversation.system, id="system", soft_wrap=True)
    s = conversation.settings
    unset = "empty: the server's default" if backend.can_list_models else "empty: the model's default"
    yield Label("Temperature (0–2, 0 is greedy)")
    yield Input(_number(s.temperature), id="temperature", type="number", placeholder=unset)
    yield Label("top_p (0–1]")
    yield Input(_number(s.top_p), id="top_p", type="number", placeholder=unset)
    yield Label("max_tokens")
    yield Input(str(s.max_tokens), id="max_tokens", type="integer")
    yield Label("seed (empty: random)")
    yield Input("" if s.seed is None else str(s.seed), id="seed", type="integer")
    if backend.can_list_models:
        yield Label("Model (served by the daemon)")
        yield Select([], id="model-select", allow_blank=True, prompt="(connecting)")
    else:
        yield Label("Model (enter loads it)")
        yield Input(backend.model or "", id="model-input",
                    placeholder="catalog name, folder, .gguf or repo id")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


class SettingsPanel(_Base):
    """Reading, filling and showing the settings panel (needs ``conversation`` and ``_fail``)."""

    conversation: Conversation

    def action_toggle_settings(self) -> None:
        panel = self.query_one("#settings")
        panel.toggle_class("-open")
        if panel.has_class("-open"):
            self.query_one("#temperature", Input).focus()
        else:
            self.query_one("#prompt", Input).focus()

    def _settings(self, quiet: bool = False) -> ChatSettings | None:
        """The settings panel's values (kept as the conversation's, and shown on the sampling
        line), or None and a message when one is not valid; ``quiet``: only read, nothing said
        or kept (a value being typed)."""
        values = {}
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            widget = self.query_one(f"#{name}", Input)
            raw = widget.value.strip()
            try:
                if name == "max_tokens":
                    values[name] = int(raw)
                elif not raw:  # unset: the model's (or the server's) default
                    values[name] = None
                else:
                    values[name] = int(raw) if name == "seed" else float(raw)
            except ValueError:
                if not quiet:
                    widget.add_class("-invalid")
                    self._fail(f"{name} is not a number: {raw!r}")
                return None
        settings = ChatSettings(**values)
        try:
            settings.check()
        except MlxctlError as exc:
            if not quiet:
                self._fail(str(exc))
            return None
        if not quiet:
            self.conversation.settings = settings
            self._show_sampling(settings)
        return settings

    def _fill_settings(self, conv: Conversation) -> None:
        s = conv.settings
        self.query_one("#system", TextArea).text = conv.system
        self.query_one("#temperature", Input).value = _number(s.temperature)
        self.query_one("#top_p", Input).value = _number(s.top_p)
        self.query_one("#max_tokens", Input).value = str(s.max_tokens)
        self.query_one("#seed", Input).value = "" if s.seed is None else str(s.seed)
