"""The chat window's side of images: attaching them to the next message and showing them.

Kept out of :mod:`mlxctl.tui.chat` (a mixin of :class:`~mlxctl.tui.chat.ChatApp`) so the app
module stays about the conversation. Images wait in ``pending`` (shown above the prompt) until
the next message is sent, which takes them; ``/image PATH`` typed in the prompt or F4 (a path
prompt) attach one, ``/detach`` drops them. A file that cannot be used is a notification, and
nothing is attached.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from mlxctl.errors import MlxctlError
from mlxctl.tui.chat_images import Attachment, ImageStore, label, read_attachment
from mlxctl.tui.chat_vision import refused_here

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

COMMANDS = ("/image", "/detach")
USAGE = "/image PATH attaches an image to the next message, /image alone asks for a path, /detach drops them"


class ImageAttaching(_Base):
    """Pending images and the commands that change them (needs ``#attached`` and ``_fail``)."""

    images: ImageStore
    pending: list[Attachment]

    def _init_images(self, attachments: list[Attachment]) -> None:
        self.images = ImageStore()
        self.pending = []
        for attachment in attachments:
            self.images.add(attachment)
            self.pending.append(attachment)

    def image_command(self, text: str) -> bool | None:
        """Run ``text`` if it is an image command: True done, False failed, None not a command."""
        word, _, rest = text.partition(" ")
        if word not in COMMANDS:
            return None
        if word == "/detach":
            dropped, self.pending = len(self.pending), []
            self.show_pending()
            self.notify(f"dropped {dropped} image(s)" if dropped else "no images were attached", markup=False)
            return True
        if not rest.strip():
            self.action_attach_image()
            return True
        return self.attach(_unquote(rest.strip()))

    def action_attach_image(self) -> None:
        from mlxctl.tui.chat import PathScreen

        self.push_screen(PathScreen("Attach an image to the next message", "", placeholder="path/to/image.png"),
                         self._attach_picked)

    def _attach_picked(self, path: str | None) -> None:
        if path:
            self.attach(path)

    def attach(self, path: str) -> bool:
        try:
            attachment = read_attachment(path, "/image")
        except MlxctlError as exc:
            self._fail(exc.message)  # type: ignore[attr-defined]
            return False
        ref = self.images.add(attachment)
        self.pending.append(attachment)
        self.show_pending()
        self.notify(f"attached {label(ref)} to the next message", markup=False)
        return True

    def take_pending(self) -> list[dict]:
        refs, self.pending = [a.ref() for a in self.pending], []
        self.show_pending()
        return refs

    def restore_pending(self, refs: list[dict]) -> None:
        """Put a message's images back (edit and resend); ones no longer readable are said."""
        for ref in refs:
            if (found := self.images.get(ref)) is not None:
                self.pending.append(found)
            else:
                self.notify(f"{label(ref, self.images.problem(ref))} is not attached again", severity="warning",
                            markup=False)
        self.show_pending()

    def pending_refused(self) -> str | None:
        """Why the images waiting cannot go to this model (None: send them)."""
        return refused_here(self.backend) if self.pending else None  # type: ignore[attr-defined]

    def show_pending(self) -> None:
        bar = self.query_one("#attached", Static)
        bar.display = bool(self.pending)
        lines = " ".join(label(a.ref()) for a in self.pending)
        bar.update(Text(f"next message: {lines} · /detach drops them"))


def _unquote(path: str) -> str:
    """A path as a terminal pastes a dropped file: quoted or with escaped spaces, or plain."""
    try:
        words = shlex.split(path)
    except ValueError:
        return path
    return words[0] if len(words) == 1 else path
