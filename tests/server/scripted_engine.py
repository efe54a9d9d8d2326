"""A scripted engine for the golden transcripts: the interface the views use, no model.

``ScriptedEngine(scripts)`` is what ``init_app`` takes: ``model`` (a byte tokenizer with a small
chat template), ``vocab_size``, ``queued`` and ``submit()``, which returns a real
:class:`RequestStream` fed at once with the events of the script the prompt names
(``script <name>`` in the user's text). Each piece of a script is one TokenEvent (one token);
the stream ends with one FinishEvent whose usage counts the real prompt tokens and the pieces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mlxctl.engine.events import FinishEvent, FinishReason, Timings, TokenEvent, Usage
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import EngineError

# only the users' turns are rendered: the prompt (and so usage) does not move when the
# server's tools system prompt is reworded
CHAT_TEMPLATE = ("{% for m in messages %}{% if m.role == 'user' %}<|user|>{{ m.content }}\n{% endif %}"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
TIMINGS = Timings(queue_s=0.001, ttft_s=0.002, prefill_s=0.001, decode_s=0.004, e2e_s=0.006)
_NAMED = re.compile(r"script (\w+)")


class ByteTokenizer:
    """One token per UTF-8 byte (ids 0-255), and a Jinja chat template."""

    chat_template = CHAT_TEMPLATE
    detokenizer = None  # not byte-level BPE: logprob bytes come from decode()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(ids).decode(errors="replace")

    def apply_chat_template(self, messages: list[dict], tokenize: bool = False, add_generation_prompt: bool = True,
                            **kwargs: Any) -> str:
        import jinja2

        template = jinja2.Template(self.chat_template)
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt)


@dataclass(frozen=True)
class Script:
    """What the engine "generates": ``pieces`` one token each, then how it ends."""

    pieces: tuple[str, ...]
    reason: FinishReason = FinishReason.STOP
    stop_string: str | None = None  # the stop string that ended it (reason STOP)
    cached_tokens: int = 0
    error: str | None = None  # an EngineError with this message ends the stream (reason ERROR)

    def events(self, prompt_tokens: int) -> list:
        tokens = [TokenEvent(text, (i,)) for i, text in enumerate(self.pieces)]
        usage = Usage(prompt_tokens, len(self.pieces), self.cached_tokens)
        error = EngineError(self.error) if self.error else None
        reason = FinishReason.ERROR if error else self.reason
        return tokens + [FinishEvent(reason, usage, TIMINGS, error=error, stop_string=self.stop_string)]


@dataclass
class ScriptedModel:
    tokenizer: ByteTokenizer = field(default_factory=ByteTokenizer)
    name: str = "scripted"
    context_length: int = 4096
    config: dict = field(default_factory=dict)


class ScriptedEngine:
    """Plays the script named in the prompt; aborts are no-ops (every event is queued at once)."""

    vocab_size = 256
    queued = 0

    def __init__(self, scripts: dict[str, Script]):
        self.scripts = scripts
        self.model = ScriptedModel()
        self._count = 0

    def submit(self, prompt_tokens: list[int], params: Any, *, request_id: str | None = None, loop: Any = None,
               cache_salt: str = "", images: Any = (), group: Any = None) -> RequestStream:
        self._count += 1
        stream = RequestStream(request_id or f"req-{self._count}", lambda _rid: None, loop)
        script = self._script(prompt_tokens)
        stream.cached_tokens = script.cached_tokens  # as the engine sets it when it schedules the request
        for event in script.events(len(prompt_tokens)):
            stream.put(event)
        return stream

    def _script(self, prompt_tokens: list[int]) -> Script:
        found = _NAMED.search(self.model.tokenizer.decode(prompt_tokens))
        if found is None or found.group(1) not in self.scripts:
            raise AssertionError(f"no script named in the prompt {self.model.tokenizer.decode(prompt_tokens)!r}")
        return self.scripts[found.group(1)]

    def stats(self) -> dict:
        return {}

    def shutdown(self) -> None:
        pass
