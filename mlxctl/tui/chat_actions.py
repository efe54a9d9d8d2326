"""The conversation's actions in `mlxctl chat`: regenerate, edit, copy, new, save, load.

:class:`ConversationActions` is a mixin of :class:`~mlxctl.tui.chat.ChatApp`. It keeps the
transcript's widgets (``turns``, one per message) in step with the conversation's messages when
they are cut back, rebuilt from a loaded file, or added to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, TextArea

from mlxctl.errors import MlxctlError
from mlxctl.tui.chat_images import ImageStore, load_conversation
from mlxctl.tui.chat_panels import PathScreen
from mlxctl.tui.chat_widgets import AssistantTurn, UserTurn
from mlxctl.tui.conversation import Conversation

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class ConversationActions(_Base):
    """The keys that change the conversation, and the transcript that shows it (needs ``backend``,
    ``busy_reason``, ``last_done``, ``path``, the settings panel and the status line)."""

    conversation: Conversation
    images: ImageStore
    turns: list[Vertical]

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
        self._show_sampling(conv.settings)
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
