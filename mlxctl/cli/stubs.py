"""Top-level verbs that exist in the tree but are not built yet.

Each is a real command with its docstring and main arguments, so ``--help``, completions and
the man page show the whole tool; running one exits with ``ExitStatus.NOT_IMPLEMENTED``.
When a verb gets built it moves to its own module and leaves ``COMMANDS`` here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.cli.memory import KvBitsOpt, KvGroupSizeOpt, MaxModelLenOpt, engine_config
from mlxctl.cli.options import (DEFAULT_URL, DraftDtypeOpt, DraftModelOpt, GrowDraftsOpt, ModelOpt, NumDraftTokensOpt,
                                SeedOpt, ServerKeyOpt, SpeculativeOpt, SystemOpt, UrlOpt)
from mlxctl.errors import NotImplementedYetError


def not_built(name: str) -> NotImplementedYetError:
    """The error a planned verb raises."""
    return NotImplementedYetError(f"'{name}' is not built yet (planned)")


ChatUrlOpt = Annotated[
    Optional[str],
    typer.Option("--url", metavar="URL", show_default=False,
                 help="Chat through a running server at this base URL instead of loading the model here."),
]
ChatKeyOpt = Annotated[
    Optional[str],
    typer.Option("--api-key", metavar="KEY", envvar="MLXCTL_API_KEY", show_default=False,
                 help="With --url: bearer token for a server started with --api-key."),
]
LoadOpt = Annotated[
    Optional[Path],
    typer.Option("--load", metavar="FILE", show_default=False,
                 help="Start from a conversation saved as JSON (ctrl+s in the app)."),
]
ChatTempOpt = Annotated[
    Optional[float],
    typer.Option("--temperature", "-t", metavar="T", min=0.0, max=2.0, show_default=False,
                 help="Sampling temperature, 0 is greedy [default: the model's generation_config.json, else 0; "
                      "with --url the server's]."),
]
ChatMaxOpt = Annotated[
    Optional[int],
    typer.Option("--max-tokens", "-n", metavar="N", min=1, show_default=False,
                 help="Most tokens per answer [default: 1024]."),
]
ChatImageOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--image", metavar="PATH", show_default=False,
                 help="An image for a vision model, sent with the first message (repeatable; "
                      "/image PATH or F4 attaches more in the app)."),
]


def chat(ctx: typer.Context, model: ModelOpt = None, url: ChatUrlOpt = None, api_key: ChatKeyOpt = None,
         load: LoadOpt = None, system: SystemOpt = None, temperature: ChatTempOpt = None,
         max_tokens: ChatMaxOpt = None, seed: SeedOpt = None, image: ChatImageOpt = None,
         speculative: SpeculativeOpt = "off", num_draft_tokens: NumDraftTokensOpt = 8,
         grow_drafts: GrowDraftsOpt = None, draft_model: DraftModelOpt = None, draft_dtype: DraftDtypeOpt = "auto",
         kv_bits: KvBitsOpt = 0, kv_group_size: KvGroupSizeOpt = 64, max_model_len: MaxModelLenOpt = None) -> None:
    """Chat with a model in a terminal UI.

    Loads MODEL here, or with --url talks to a running server (picking among its /v1/models).
    Answers stream as Markdown, reasoning folds away, settings (F2) change sampling and the
    model. Keys: F1 help, ctrl+r regenerate, ctrl+l edit, F3 copy, ctrl+s save, ctrl+o open,
    F4 attach an image.
    """
    import sys

    from mlxctl.errors import BadInputError
    from mlxctl.tui.chat_images import load_conversation, read_attachment
    from mlxctl.tui.client import base_url
    from mlxctl.tui.conversation import Conversation

    base = base_url(url) if url is not None else None
    config = engine_config(ctx, (speculative, num_draft_tokens, draft_model, draft_dtype, grow_drafts),
                           (kv_bits, kv_group_size), max_model_len)
    local = [flag for flag, given in (("--speculative", config.speculation.enabled), ("--kv-bits", config.kv.enabled),
                                      ("--max-model-len", max_model_len is not None)) if given]
    if base is not None and local:
        raise BadInputError(f"{local[0]} applies to a model loaded here, not to --url",
                            hint=f"start the server with mlxctl serve {local[0]} ...")
    conversation = load_conversation(load) if load is not None else Conversation()
    images = [read_attachment(path, f"--image {path}") for path in image or ()]  # a bad file fails at once
    if system is not None:
        conversation.system = system
    for name, value in (("temperature", temperature), ("max_tokens", max_tokens), ("seed", seed)):
        if value is not None:
            setattr(conversation.settings, name, value)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInputError("'chat' needs a terminal", hint="for one answer in scripts use mlxctl run")
    if base is None:
        from mlxctl.cli.blas import ensure_fast_blas

        ensure_fast_blas()
    from mlxctl.tui.chat import ChatApp
    from mlxctl.tui.chat_backend import DaemonBackend, EngineBackend

    backend = DaemonBackend(base, api_key=api_key, model=model) if base else \
        EngineBackend(model, open_model=_engine_opener(config))
    ChatApp(backend, conversation, conversation_path=str(load) if load else None, images=images).run()


def _engine_opener(config):
    """What opens the chat's in-process engine: ``open_engine`` with the engine flags."""
    import functools

    from mlxctl.generation import open_engine

    return functools.partial(open_engine, config=config)


IntervalOpt = Annotated[
    float,
    typer.Option("--interval", metavar="SECONDS", min=0.1, help="Seconds between polls of the server."),
]


def top(url: UrlOpt = DEFAULT_URL, interval: IntervalOpt = 1.0, api_key: ServerKeyOpt = None) -> None:
    """Watch a running server live.

    Shows requests running and waiting, tokens per second, time to first token, prefix cache
    and memory use. Keys: q quit, p pause, r reset. Keeps retrying while the server is down.
    """
    import sys

    from mlxctl.errors import BadInputError
    from mlxctl.tui.client import base_url

    base = base_url(url)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInputError("'top' needs a terminal", hint=f"for figures in scripts use curl {base}/v1/status")
    from mlxctl.tui.top import TopApp

    TopApp(url=base, interval=interval, api_key=api_key).run()


COMMANDS = {
    "chat": chat,
    "top": top,
}
