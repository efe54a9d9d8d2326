"""Prompt rendering: chat messages -> token ids through the model's own chat template."""

from __future__ import annotations

from typing import Any

from mlxctl.errors import BadInputError


def chat_messages(prompt: str, system: str | None = None) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": prompt}]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_chat(tokenizer: Any, messages: list[dict[str, Any]], **template_kwargs: Any) -> list[int]:
    """Apply the chat template (with the generation prompt) and tokenize the result."""
    if not has_chat_template(tokenizer):
        raise BadInputError("this model has no chat template", hint="use --raw to send the prompt as plain text")
    if not messages:  # e.g. only an assistant prefill: templates raise a bare ValueError on this
        raise BadInputError("the conversation is empty: give at least one message before the reply",
                            param="messages")
    from jinja2 import TemplateError

    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
    except (ValueError, TypeError, KeyError, IndexError, TemplateError) as exc:  # the template refused them
        raise BadInputError(f"the model's chat template rejected the conversation: {exc}", param="messages") from exc
    return encode_text(tokenizer, text, special=False)


def encode_text(tokenizer: Any, text: str, special: bool = True) -> list[int]:
    """Tokenize plain text; ``special`` adds the model's BOS where it wants one."""
    return list(tokenizer.encode(text, add_special_tokens=special))
