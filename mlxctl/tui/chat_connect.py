"""Connecting `mlxctl chat` to its backend, switching models, and the lines that report it.

:class:`Connection` is a mixin of :class:`~mlxctl.tui.chat.ChatApp`: connecting at start (an
engine loads in a worker thread, whose progress comes back through :meth:`~Connection._progress`),
the daemon's models or the model to load in the settings panel, and the header and status lines
(busy, failed, or ready with the last answer's TTFT and tok/s) and the sampling line under them
(:mod:`~mlxctl.tui.chat_sampling`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Input, Select, Static

from mlxctl.tui.chat_backend import Backend, BackendError, Done
from mlxctl.tui.chat_widgets import stats_text
from mlxctl.tui.conversation import ChatSettings, Conversation

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class Connection(_Base):
    """The backend's connection and the header and status lines (needs ``#header``, ``#status``
    and the model widget of the settings panel)."""

    backend: Backend
    conversation: Conversation
    busy_reason: str | None
    ready: bool
    last_done: Done | None
    last_error: str | None
    _thread: int

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
        self._show_sampling()
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
        self._show_sampling()

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

    def _show_sampling(self, settings: ChatSettings | None = None) -> None:
        """The ``sampling: ...`` line under the status bar: what ``settings`` (default: the
        conversation's) leave to the model or the server, and where each value comes from."""
        line = self.backend.sampling_text(settings or self.conversation.settings)
        self.query_one("#sampling", Static).update(Text(line or ""))

    @property
    def status_text(self) -> str:
        return str(self.query_one("#status", Static).content)

    @property
    def sampling_text(self) -> str:
        return str(self.query_one("#sampling", Static).content)
