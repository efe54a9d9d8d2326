"""The library call behind `mlxctl run`: resolve and load a model, render a prompt, submit it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import BadInputError, MlxctlError

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PromptSpec:
    """What the user asked: a prompt, optionally a system prompt, templated or raw, and images
    (``vision.images.ImageInput``, for a vision model: see docs/vision.md)."""

    text: str
    system: str | None = None
    raw: bool = False
    images: tuple = ()


LOAD_FORMATS = ("auto", "dummy")


def open_engine(model_ref: str | None, *, dtype: str = "auto", progress: Progress | None = None,
                config: EngineConfig = EngineConfig(), load_format: str = "auto",
                moe_top_k: int | None = None, group: Any = None) -> Engine:
    """Resolve ``model_ref`` (fetching/importing on first use) and start an engine on it."""
    return lazy_engine(model_ref, dtype=dtype, progress=progress, config=config, load_format=load_format,
                       moe_top_k=moe_top_k, group=group).start()


def lazy_engine(model_ref: str | None, *, dtype: str = "auto", progress: Progress | None = None,
                config: EngineConfig = EngineConfig(), load_format: str = "auto",
                moe_top_k: int | None = None, group: Any = None) -> Engine:
    """An engine not started yet: ``start()`` resolves ``model_ref`` and loads it on the engine
    thread (`serve` listens meanwhile, answering 503 until the model is ready).

    ``group`` (``distributed.group.tensor_group``): the model is split over the group's ranks
    and the engine runs in lockstep with theirs (see mlxctl/distributed)."""
    load = model_loader(model_ref, dtype, progress, load_format, moe_top_k, group)
    if group is None:
        return Engine(load, config)
    from mlxctl.distributed.lockstep import lockstep_engine

    return lockstep_engine(load, config, group)


def model_loader(model_ref: str | None, dtype: str, progress: Progress | None, load_format: str = "auto",
                 moe_top_k: int | None = None, group: Any = None):
    """The function the engine thread calls to resolve and load the model.

    ``load_format="dummy"``: ``model_ref`` is an architecture preset or a config.json, built
    with random weights and the default model's tokenizer (for speed work; models/dummy.py)."""
    if load_format not in LOAD_FORMATS:
        raise BadInputError(f"unknown load format {load_format!r}", hint="choose auto or dummy")
    load = _load_dummy if load_format == "dummy" else _load_real
    return lambda: _adapted(load(model_ref, dtype, progress, group), moe_top_k, progress)


def _sharder(group: Any):
    """The ``prepare`` hook that splits a lazily loaded model over ``group`` (None: no split)."""
    if group is None:
        return None
    from mlxctl.distributed.plan import shard_model, shard_plan

    def prepare(model: Any, config: dict) -> None:
        shard_plan(config, group.size())
        shard_model(model, group)

    return prepare


def _resolved(model_ref: str | None, progress: Progress | None, group: Any):
    """``resolve_model``, by rank 0 first when several ranks share one machine's model store
    (a first use fetches or imports the model; two ranks doing it at once would race)."""
    from mlxctl.models.resolve import resolve_model

    if group is None:
        return resolve_model(model_ref, progress=progress)
    from mlxctl.distributed.channel import Channel

    channel = Channel(group)
    if group.rank() != 0:  # the others resolve once rank 0 is done, or fail with it
        failed = channel.broadcast()
        if failed:
            raise MlxctlError(f"rank 0 could not resolve the model: {failed}")
        return resolve_model(model_ref)
    try:
        resolved = resolve_model(model_ref, progress=progress)
    except BaseException as exc:
        channel.broadcast(str(exc) or type(exc).__name__)
        raise
    channel.broadcast(None)
    return resolved


def _adapted(loaded, moe_top_k: int | None, progress: Progress | None):
    """The loaded model made ready for the engine: quantized layers fold a batch's rows into
    one matmul (models/quantized_rows.py), short multi-token passes on CUDA attend without a
    kernel built per key length (models/short_attention.py), and ``--moe-top-k`` routes to
    fewer experts."""
    from mlxctl.engine.wired import backend
    from mlxctl.models import short_attention
    from mlxctl.models.quantized_rows import fold_quantized_rows

    fold_quantized_rows(loaded.model)
    short_attention.install(backend())
    if moe_top_k is not None:
        from mlxctl.models.moe import set_moe_top_k

        set_moe_top_k(loaded.model, moe_top_k, progress)
    return loaded


def _load_real(model_ref, dtype, progress, group=None):
    from mlxctl.models.loader import load_model

    resolved = _resolved(model_ref, progress, group)
    if progress:
        progress(f"loading {resolved.name}" + (f" split over {group.size()} ranks" if group is not None else ""))
    return load_model(resolved.path, dtype=dtype, prepare=_sharder(group))


def _load_dummy(model_ref, dtype, progress, group=None):
    from mlxctl.models.dummy import load_dummy

    return load_dummy(model_ref, _resolved(None, progress, group).path, dtype, prepare=_sharder(group))


def prompt_tokens(engine: Engine, spec: PromptSpec) -> list[int]:
    from mlxctl.api.prompt import chat_messages, encode_text, render_chat

    tokenizer = engine.model.tokenizer
    text = with_image_marks(engine, spec)
    if spec.raw:
        text = f"{spec.system}\n\n{text}" if spec.system else text
        return encode_text(tokenizer, text)
    return render_chat(tokenizer, chat_messages(text, spec.system))


def with_image_marks(engine: Engine, spec: PromptSpec) -> str:
    """The prompt text with one image placeholder per image: the user's own, when the text
    already has exactly as many, else the images first, a line each (a prompt with some
    placeholders but not one per image is refused)."""
    if not spec.images:
        return spec.text
    from mlxctl.vision import image_token, images_refused

    token = image_token(engine.model)
    if token is None:
        raise images_refused(engine.model)
    marks = spec.text.count(token)
    if marks == len(spec.images):
        return spec.text
    if marks:
        raise BadInputError(f"the prompt has {marks} {token} placeholder(s) for {len(spec.images)} image(s)",
                            hint=f"put one {token} where each image goes, or none to put the images first")
    return "".join(f"{token}\n" for _ in spec.images) + spec.text


def generate(engine: Engine, spec: PromptSpec, params: SamplingParams) -> RequestStream:
    """Submit one prompt; iterate the returned stream for its events."""
    return engine.submit(prompt_tokens(engine, spec), params, images=spec.images)
