"""Answering in `mlxctl chat`: a sent message goes into the conversation and an answer streams in.

:class:`Answering` is a mixin of :class:`~mlxctl.tui.chat.ChatApp`. The answer runs in a worker
(``answering``; esc cancels it) that streams the backend's deltas, with the conversation's images
(:mod:`mlxctl.tui.chat_vision`), into an :class:`~mlxctl.tui.chat_widgets.AssistantTurn`. What an
answer said is kept even when it was stopped; an empty one that failed is dropped.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import TYPE_CHECKING

from textual.containers import Vertical
from textual.widgets import Input, TextArea
from textual.worker import Worker

from mlxctl.tui.chat_backend import Backend, BackendError, Done
from mlxctl.tui.chat_images import Attachment, ImageStore
from mlxctl.tui.chat_vision import stream as stream_with_images
from mlxctl.tui.chat_widgets import AssistantTurn, UserTurn, stats_text
from mlxctl.tui.conversation import Conversation

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class Answering(_Base):
    """Sending a message and streaming its answer (needs the connection, the settings panel, the
    transcript and the pending images)."""

    backend: Backend
    conversation: Conversation
    images: ImageStore
    pending: list[Attachment]
    turns: list[Vertical]
    answering: Worker | None
    last_done: Done | None

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
