"""`serve --warm-prompts FILE`: prefill known prompts at start, so their first request hits the cache.

The file is JSON (a list) or JSON lines. Each entry is one of:

- a string: a system prompt (rendered through the chat template, as a conversation that starts
  with it, so every later conversation with that system prompt shares its blocks);
- ``{"messages": [...]}``: a chat conversation, rendered as a chat request would be;
- ``{"prompt": "..."}``: raw text, tokenized as a completion request would be.

Entries are prefilled with at most ``concurrency`` in flight, so a large file cannot take the
memory that serving needs at boot. A prompt that fails (too long for the context, say) is
reported and skipped; the file itself is checked when the server starts, before it listens.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError, MlxctlError

log = logging.getLogger("mlxctl.server")


@dataclass(frozen=True)
class WarmPrompt:
    where: str  # "FILE:LINE" or "FILE[i]", for messages
    messages: list[dict[str, Any]] | None = None
    text: str | None = None


@dataclass
class WarmProgress:
    total: int = 0
    done: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    running: bool = False
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"total": self.total, "done": self.done, "failed": self.failed, "running": self.running,
                "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens, "errors": self.errors[-10:]}


def load_warm_prompts(path: str | Path) -> list[WarmPrompt]:
    """Read and check the file; any problem is a BadInputError naming the file and the entry."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read the warm-prompts file {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}") from exc
        entries = [(f"{path}[{i}]", item) for i, item in enumerate(items)]
    else:
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append((f"{path}:{n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise BadInputError(f"{path}:{n}: not valid JSON: {exc.msg}",
                                    hint="give a JSON list or one JSON value per line") from exc
    if not entries:
        raise BadInputError(f"the warm-prompts file {path} has no prompts")
    return [_entry(where, item) for where, item in entries]


def _entry(where: str, item: Any) -> WarmPrompt:
    if isinstance(item, str) and item.strip():
        return WarmPrompt(where, messages=[{"role": "system", "content": item}])
    if isinstance(item, dict):
        unknown = set(item) - {"messages", "prompt"}
        if unknown:
            raise BadInputError(f"{where}: unknown key {sorted(unknown)[0]!r}", hint="use messages or prompt")
        if "messages" in item and "prompt" in item:
            raise BadInputError(f"{where}: give messages or prompt, not both")
        messages = item.get("messages")
        if messages is not None:
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
                raise BadInputError(f"{where}: messages must be a non-empty list of objects with a role")
            return WarmPrompt(where, messages=messages)
        prompt = item.get("prompt")
        if isinstance(prompt, str) and prompt:
            return WarmPrompt(where, text=prompt)
    raise BadInputError(f"{where}: expected a non-empty string, {{\"messages\": [...]}} or {{\"prompt\": \"...\"}}")


def tokens_of(tokenizer: Any, prompt: WarmPrompt) -> list[int]:
    from mlxctl.api.prompt import encode_text, render_chat

    if prompt.messages is not None:
        return render_chat(tokenizer, prompt.messages)
    return encode_text(tokenizer, prompt.text)


async def warm(engine: Any, prompts: list[WarmPrompt], concurrency: int, progress: WarmProgress) -> WarmProgress:
    """Prefill every prompt (one generated token each), at most ``concurrency`` at a time."""
    from mlxctl.engine.sampling import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=1)
    gate = asyncio.Semaphore(max(1, concurrency))
    loop = asyncio.get_running_loop()
    progress.total, progress.running = len(prompts), True

    async def one(prompt: WarmPrompt) -> None:
        async with gate:
            try:
                tokens = tokens_of(engine.model.tokenizer, prompt)
                done = await engine.submit(tokens, params, loop=loop).collect_async()
                progress.prompt_tokens += done.usage.prompt_tokens
                progress.cached_tokens += done.usage.cached_tokens
            except MlxctlError as err:
                progress.failed += 1
                progress.errors.append(f"{prompt.where}: {err.message}")
                log.warning("warm prompt %s skipped: %s", prompt.where, err.message)
            progress.done += 1

    try:
        await asyncio.gather(*(one(p) for p in prompts))
    finally:
        progress.running = False
    log.info("warmed %d prompts (%d tokens, %d failed)", progress.done - progress.failed, progress.prompt_tokens,
             progress.failed)
    return progress
