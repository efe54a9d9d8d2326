"""A request's prompt, rendered and tokenized off the event loop.

Rendering the chat template and tokenizing a long prompt is work the loop would otherwise do
one request at a time while every stream waits: a py-spy profile of the daemon at 64 streams on
an H100 (scripts/gpu_profile_serve.sh, docs/benchmarks.md) found the loop in the tokenizer for
about 4 ms a 540-token prompt, so a burst of 64 requests reached the engine over a quarter of a
second, one after another. The tokenizers release the GIL while they encode, so a few threads
prepare a burst's prompts side by side and the loop goes on streaming meanwhile.

Only read-only use of the tokenizer happens here (no truncation or padding is ever switched
on, which would mutate the shared Rust tokenizer under a concurrent encode).
"""

from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")
THREAD_NAME = "mlxctl-prompt"


@functools.cache
def _executor() -> ThreadPoolExecutor:
    """The process's prompt threads, made on first use (a burst's prompts side by side)."""
    return ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2)), thread_name_prefix=THREAD_NAME)


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on the prompt threads; its exception (a BadInputError for a
    prompt the template refuses) is raised here, as if called in place."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
