"""Images attached to `mlxctl chat` messages: read once, kept by content, saved by reference.

A user message with images carries ``"images": [{"path", "sha256", "width", "height"}, ...]``
next to its text ``content`` (a local key, like ``reasoning_content``: it is turned into what
each backend reads only when a request is sent, by :mod:`mlxctl.tui.chat_vision`). Saved files
keep that reference, not the pixels, so a conversation stays small and readable; loading it
reads each file again and checks its SHA-256, so a moved, deleted or edited picture is said
once and left out of what is sent instead of silently standing in for the one talked about.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError
from mlxctl.tui.conversation import Conversation
from mlxctl.vision.images import MAX_IMAGE_BYTES, ImageError, ImageInput, decode_image

MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif",
               "BMP": "image/bmp", "TIFF": "image/tiff"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, eq=False)
class Attachment:
    """One image file as read: its bytes (for data URLs), the decoded image (for the engine)."""

    path: str  # absolute, so a saved conversation finds it from any folder
    sha256: str
    media_type: str
    data: bytes
    image: ImageInput

    def ref(self) -> dict:
        """What a message (and a saved file) keeps of it."""
        width, height = self.image.size
        return {"path": self.path, "sha256": self.sha256, "width": width, "height": height}

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"


def read_attachment(path: str | Path, where: str) -> Attachment:
    """Read and decode an image file; an ImageError (one line, naming ``where``) otherwise."""
    from PIL import Image

    file = Path(path).expanduser().absolute()
    try:
        if not file.is_file():
            raise ImageError(where, f"no such file: {file}" if not file.exists() else f"{file} is not a file")
        if file.stat().st_size > MAX_IMAGE_BYTES:
            raise ImageError(where, f"{file} is more than the {MAX_IMAGE_BYTES} bytes allowed")
        data = file.read_bytes()
    except PermissionError:
        raise ImageError(where, f"cannot read {file}: permission denied") from None
    except OSError as exc:
        raise ImageError(where, f"cannot read {file}: {exc.strerror or exc}") from None
    image = decode_image(data, where)
    with Image.open(io.BytesIO(data)) as header:  # the header only: decode_image has checked it
        media_type = MEDIA_TYPES.get(header.format or "", "image/png")
    return Attachment(str(file), hashlib.sha256(data).hexdigest(), media_type, data, image)


def label(ref: dict, problem: str | None = None) -> str:
    """The transcript line for an image: ``[image: cat.png 640×480]`` (and why it is left out)."""
    size = f" {ref['width']}×{ref['height']}" if ref.get("width") and ref.get("height") else ""
    why = f" — left out: {problem}" if problem else ""
    return f"[image: {Path(ref['path']).name}{size}{why}]"


class ImageStore:
    """The attachments of one chat by content hash, and why a saved reference cannot be used."""

    def __init__(self) -> None:
        self._by_hash: dict[str, Attachment] = {}
        self._problems: dict[tuple[str, str], str] = {}

    def add(self, attachment: Attachment) -> dict:
        self._by_hash[attachment.sha256] = attachment
        return attachment.ref()

    def get(self, ref: dict) -> Attachment | None:
        """The image a reference names, read on first use; None when it is gone or changed."""
        if found := self._by_hash.get(ref["sha256"]):
            return found
        key = (ref["path"], ref["sha256"])
        if key in self._problems:
            return None
        try:
            attachment = read_attachment(ref["path"], ref["path"])
        except ImageError as exc:
            self._problems[key] = exc.message.removeprefix(f"{exc.param}: ")
            return None
        if attachment.sha256 != ref["sha256"]:
            self._problems[key] = f"{ref['path']} changed since the conversation was saved"
            return None
        return self._by_hash.setdefault(attachment.sha256, attachment)

    def problem(self, ref: dict) -> str | None:
        return None if self.get(ref) else self._problems.get((ref["path"], ref["sha256"]))

    def check(self, messages: list[dict]) -> list[str]:
        """Look at every image of ``messages`` afresh (a file may be back); one line per one gone."""
        self._problems.clear()
        lines = []
        for message in messages:
            for ref in message.get("images") or ():
                if why := self.problem(ref):
                    lines.append(f"image {Path(ref['path']).name} is left out of what is sent: {why}")
        return lines

    def labels(self, message: dict) -> list[str]:
        return [label(ref, self.problem(ref)) for ref in message.get("images") or ()]


def load_conversation(path: str | Path) -> Conversation:
    """:meth:`Conversation.load`, keeping the ``images`` references of user messages."""
    conversation = Conversation.load(path)
    data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))  # load() has read and checked it
    raw = data if isinstance(data, list) else data["messages"]
    kept, leading = [], True
    for message in raw:  # as from_json: leading system/developer messages became the system prompt
        if leading and message.get("role") in ("system", "developer"):
            continue
        leading = False
        kept.append(message)
    for i, (message, source) in enumerate(zip(conversation.messages, kept, strict=True)):
        if source.get("images") is not None and message["role"] == "user":
            message["images"] = [_ref(ref, f"{Path(path).expanduser()}: messages[{i}].images[{j}]")
                                 for j, ref in enumerate(_list(source["images"], path, i))]
    return conversation


def _list(value: Any, path: str | Path, i: int) -> list:
    if not isinstance(value, list):
        raise BadInputError(f"{Path(path).expanduser()}: messages[{i}].images must be a list")
    return value


def _ref(ref: Any, where: str) -> dict:
    if not (isinstance(ref, dict) and isinstance(ref.get("path"), str)
            and isinstance(ref.get("sha256"), str) and _SHA256.fullmatch(ref["sha256"])):
        raise BadInputError(f"{where} needs a path and a sha256 (64 hex digits)")
    out = {"path": ref["path"], "sha256": ref["sha256"]}
    for side in ("width", "height"):
        if isinstance(ref.get(side), int):
            out[side] = ref[side]
    return out
