"""A chat conversation as data: the turns, the system prompt and the sampling settings.

:class:`Conversation` is what `mlxctl chat` shows and sends, and what ``ctrl+s`` / ``ctrl+o`` /
``--load`` write and read as JSON. Messages are OpenAI chat messages (``role``, ``content``;
assistant turns may carry ``reasoning_content`` and ``tool_calls``), so a saved file can be sent
to ``/v1/chat/completions`` as it is. Nothing here imports Textual or MLX.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError, ModelNotFoundError

FORMAT = "mlxctl-chat"
VERSION = 1
ROLES = ("user", "assistant", "tool")


@dataclass
class ChatSettings:
    """The sampling settings a chat sends with each request. temperature / top_p None: not set
    here, so the model's default applies (in-process: its generation_config.json, else run's
    built-ins; through a daemon: left out of the request, the server's default)."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int = 1024
    seed: int | None = None

    def check(self) -> None:
        """Raise BadInputError naming the first setting out of range."""
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise BadInputError(f"temperature must be between 0 and 2, got {self.temperature:g}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise BadInputError(f"top_p must be greater than 0 and at most 1, got {self.top_p:g}")
        if self.max_tokens < 1:
            raise BadInputError(f"max_tokens must be at least 1, got {self.max_tokens}")

    @classmethod
    def from_dict(cls, data: Any) -> ChatSettings:
        if not isinstance(data, dict):
            raise BadInputError("settings must be a JSON object")
        known = {f.name for f in fields(cls)}
        try:
            settings = cls(**{k: v for k, v in data.items() if k in known})
            settings = cls(_or_none(float, settings.temperature), _or_none(float, settings.top_p),
                           int(settings.max_tokens), _or_none(int, settings.seed))
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"bad settings: {exc}") from None
        settings.check()
        return settings


def _or_none(kind: type, value: Any) -> Any:
    return None if value is None else kind(value)


@dataclass
class Conversation:
    messages: list[dict] = field(default_factory=list)  # user / assistant / tool turns, no system
    system: str = ""
    settings: ChatSettings = field(default_factory=ChatSettings)
    model: str | None = None  # the model it was held with (informative)

    def request_messages(self) -> list[dict]:
        """What is sent: the system prompt (when set) and every turn, without local-only keys."""
        head = [{"role": "system", "content": self.system}] if self.system.strip() else []
        return head + [wire_message(m) for m in self.messages]

    def last(self, role: str) -> int | None:
        """Index of the last message with ``role`` (None when there is none)."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].get("role") == role:
                return i
        return None

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "model": self.model, "system": self.system,
                "settings": asdict(self.settings), "messages": self.messages}

    def save(self, path: str | Path) -> Path:
        """Write the conversation as JSON to ``path`` (``~`` expanded, folders made)."""
        target = Path(path).expanduser()
        if target.is_dir():
            raise BadInputError(f"{target} is a folder", hint="give a file name, e.g. chat.json")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            raise BadInputError(f"cannot write {target}: {exc.strerror or exc}") from None
        return target

    @classmethod
    def load(cls, path: str | Path) -> Conversation:
        """Read a file written by :meth:`save`; also accepted: ``{"messages": [...]}`` or a bare
        list of OpenAI messages (a leading system message becomes the system prompt)."""
        source = Path(path).expanduser()
        try:
            text = source.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ModelNotFoundError(f"no such file: {source}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{source} is not JSON: {exc.msg} at line {exc.lineno}") from None
        try:
            return cls.from_json(data)
        except BadInputError as exc:
            raise BadInputError(f"{source}: {exc.message}", hint=exc.hint) from None

    @classmethod
    def from_json(cls, data: Any) -> Conversation:
        if isinstance(data, list):
            data = {"messages": data}
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise BadInputError("not a conversation: expected an object with a messages list")
        if data.get("format", FORMAT) != FORMAT:
            raise BadInputError(f"unknown format {data.get('format')!r}")
        system = data.get("system") or ""
        if not isinstance(system, str):
            raise BadInputError("system must be a string")
        messages = []
        for i, message in enumerate(data["messages"]):
            if not isinstance(message, dict):
                raise BadInputError(f"messages[{i}] must be an object")
            role = message.get("role")
            if role in ("system", "developer") and not messages:
                system = system or _text(message.get("content"), i)
                continue
            if role not in ROLES:
                raise BadInputError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
            messages.append(_clean(message, i))
        settings = ChatSettings.from_dict(data["settings"]) if data.get("settings") is not None else ChatSettings()
        model = data.get("model")
        return cls(messages, system, settings, model if isinstance(model, str) else None)


def _text(content: Any, i: int) -> str:
    """A message's content as text (OpenAI content parts joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadInputError(f"messages[{i}].content must be text")


def _clean(message: dict, i: int) -> dict:
    out: dict[str, Any] = {"role": message["role"], "content": _text(message.get("content"), i)}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning and message["role"] == "assistant":
        out["reasoning_content"] = str(reasoning)
    calls = message.get("tool_calls")
    if calls and message["role"] == "assistant":
        out["tool_calls"] = [_call(c, i) for c in calls]
    if message.get("tool_call_id"):
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def _call(call: Any, i: int) -> dict:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadInputError(f"messages[{i}].tool_calls: each call needs function.name")
    arguments = fn.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": str(call.get("id") or f"call_{i}"), "type": "function",
            "function": {"name": fn["name"], "arguments": arguments}}


def wire_message(message: dict) -> dict:
    """A stored message as an OpenAI request message (reasoning stays local)."""
    return {k: v for k, v in message.items() if k != "reasoning_content"}
