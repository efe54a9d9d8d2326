"""A chat turn, whatever protocol it came in, and the one way it is prepared for the engine.

Every consumer of a chat (the OpenAI, Anthropic and Responses views, the MCP loop, the TUI chat)
translates its own request into a :class:`ChatRequest` (chat-template messages, the plan of
tools / structured output / reasoning, sampling) and calls :func:`prepare_chat`, which renders
the prompt through the model's template (system messages kept where the template takes them:
api/system_messages.py), continues an assistant prefill, puts the plan's constraint on the
sampling and knows how to split the output (:meth:`PreparedChat.splitter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlxctl.api.chat_plan import ChatPlan, ModelFormats, render_plan, with_plan
from mlxctl.api.chat_split import OutputSplitter, new_splitter
from mlxctl.api.prompt import encode_text
from mlxctl.api.system_messages import render_with_systems
from mlxctl.engine.sampling import SamplingParams


@dataclass(frozen=True)
class Job:
    """One choice to generate: its prompt tokens, how to sample, and text it starts with."""

    index: int
    tokens: list[int]
    params: SamplingParams
    echo: str = ""
    reasoning_open: bool = False  # the prompt ends inside an open thinking block
    cache_salt: str = ""  # engine/kv/media.py: keys the prefix cache beyond the tokens
    images: tuple = ()  # vision.images.ImageInput, one per image placeholder of ``tokens``


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]  # chat-template messages; system messages may stand anywhere
    plan: ChatPlan
    params: SamplingParams  # the request's own sampling, before the plan's constraint
    prefill: str = ""  # assistant text the reply continues
    images: tuple = ()
    cache_salt: str = ""


@dataclass(frozen=True)
class PreparedChat:
    tokens: list[int]
    params: SamplingParams  # with the plan's constraint
    plan: ChatPlan
    reasoning_open: bool  # the prompt ends inside an open thinking block
    images: tuple = ()
    cache_salt: str = ""

    def job(self, index: int = 0) -> Job:
        return Job(index, self.tokens, self.params, reasoning_open=self.reasoning_open, cache_salt=self.cache_salt,
                   images=self.images)

    def splitter(self) -> OutputSplitter:
        return new_splitter(self.plan, self.reasoning_open)


def render_chat_prompt(tokenizer: Any, formats: ModelFormats, plan: ChatPlan, messages: list[dict[str, Any]],
                       prefill: str = "") -> tuple[list[int], bool]:
    """The prompt's token ids and whether it opened the model's thinking (a prefill never does)."""
    tokens, opens = render_with_systems(lambda m: render_plan(tokenizer, plan, formats, m), tokenizer.decode, messages)
    if prefill:
        return tokens + encode_text(tokenizer, prefill, special=False), False
    return tokens, opens


def prepare_chat(tokenizer: Any, formats: ModelFormats | None, chat: ChatRequest) -> PreparedChat:
    formats = formats or ModelFormats()
    tokens, opens = render_chat_prompt(tokenizer, formats, chat.plan, chat.messages, chat.prefill)
    return PreparedChat(tokens, with_plan(chat.params, chat.plan, opens), chat.plan, opens, chat.images,
                        chat.cache_salt)

