"""`mlxctl run`: one prompt in, streamed tokens out (composes in pipes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.cli.blas import ensure_fast_blas
from mlxctl.cli.context import given_on_command_line, output_for
from mlxctl.cli.memory import KvBitsOpt, KvGroupSizeOpt, MaxModelLenOpt, engine_config
from mlxctl.cli.options import (DraftDtypeOpt, DraftModelOpt, GrowDraftsOpt, LoadFormatOpt, MoeTopKOpt,
                                NumDraftTokensOpt, SeedOpt, SpeculativeOpt, SystemOpt, TensorParallelOpt)
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

PromptArg = Annotated[
    Optional[list[str]],
    typer.Argument(metavar="PROMPT", show_default=False,
                   help="The prompt (words are joined by spaces); read from stdin when omitted or '-'."),
]
RunModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", "-m", metavar="MODEL", show_default=False,
                 help="Catalog name, model folder, .gguf file or Hugging Face repo id (default: smollm2-135m)."),
]
RawOpt = Annotated[bool, typer.Option("--raw", help="Send the prompt as plain text, without the chat template.")]
ImageOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--image", metavar="PATH", show_default=False,
                 help="An image for a vision model (repeatable; PNG, JPEG, WebP, GIF, BMP, TIFF). The images come "
                      "before the prompt unless it places them with the model's image token (docs/vision.md)."),
]
VideoOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--video", metavar="PATH", show_default=False,
                 help="A video for a vision model (repeatable; any format FFmpeg reads): its sampled frames go "
                      "before the prompt, each labelled with its time (docs/vision.md)."),
]
FpsOpt = Annotated[
    Optional[float],
    typer.Option("--fps", metavar="F", show_default=False,
                 help="With --video: frames sampled per second of video (default 1, at most 30)."),
]
MaxFramesOpt = Annotated[
    Optional[int],
    typer.Option("--max-frames", metavar="N", show_default=False,
                 help="With --video: most frames per video, spread over the whole clip when fps would give more "
                      "(default 8, at most 32)."),
]
MaxTokensOpt = Annotated[
    int,
    typer.Option("--max-tokens", "-n", metavar="N", min=1,
                 help="Most tokens to generate; a value given here that is more than the context leaves after the "
                      "prompt is refused (the default is capped to it)."),
]
TemperatureOpt = Annotated[
    Optional[float],
    typer.Option("--temperature", "-t", metavar="T", min=0.0, max=2.0, show_default=False,
                 help="0 is greedy (deterministic). Default: the model's generation_config.json, else 0."),
]
TopPOpt = Annotated[
    Optional[float],
    typer.Option("--top-p", metavar="P", min=0.0, max=1.0, show_default=False,
                 help="Default: the model's generation_config.json, else 1."),
]
TopKOpt = Annotated[
    Optional[int],
    typer.Option("--top-k", metavar="K", min=0, show_default=False,
                 help="0 turns it off. Default: the model's generation_config.json, else 0."),
]
MinPOpt = Annotated[
    Optional[float],
    typer.Option("--min-p", metavar="P", min=0.0, max=1.0, show_default=False,
                 help="Default: the model's generation_config.json, else 0."),
]
RepetitionPenaltyOpt = Annotated[
    Optional[float],
    typer.Option("--repetition-penalty", metavar="X", min=0.0, show_default=False,
                 help="Default: the model's generation_config.json, else 1."),
]
PresencePenaltyOpt = Annotated[float, typer.Option("--presence-penalty", metavar="X", min=-2.0, max=2.0)]
FrequencyPenaltyOpt = Annotated[float, typer.Option("--frequency-penalty", metavar="X", min=-2.0, max=2.0)]
StopOpt = Annotated[
    Optional[list[str]],
    typer.Option("--stop", metavar="TEXT", show_default=False, help="Stop string (repeatable); not printed."),
]
StopTokenIdOpt = Annotated[
    Optional[list[int]],
    typer.Option("--stop-token-id", metavar="ID", min=0, show_default=False,
                 help="Stop at this token id (repeatable); not printed."),
]
LogitBiasOpt = Annotated[
    Optional[list[str]],
    typer.Option("--logit-bias", metavar="ID=BIAS", show_default=False,
                 help="Add BIAS (-100 to 100) to token ID's logit (repeatable); -100 bans it."),
]
IgnoreEosOpt = Annotated[bool, typer.Option("--ignore-eos", help="Keep going past the end-of-sequence token.")]
LogprobsOpt = Annotated[
    int,
    typer.Option("--logprobs", metavar="N", min=0, max=20,
                 help="With --json: log-probabilities of each token and N alternatives."),
]
RunDtypeOpt = Annotated[
    str,
    typer.Option("--dtype", metavar="DTYPE",
                 help="Weights dtype: auto (float32 on CPU, as stored elsewhere), native, float32, float16, "
                      "bfloat16."),
]
RunJsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object: text, finish_reason, usage, timings.")]
VerboseOpt = Annotated[
    bool,
    typer.Option("--verbose", "-v",
                 help="Print the sampling used (and where each value came from), timings and speeds on stderr."),
]
McpConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--mcp-config", metavar="FILE", show_default=False,
                 help="MCP servers file (JSON or YAML with mcpServers): the model may call their tools, which run "
                      "here; calls and results go to stderr (see docs/mcp.md)."),
]
McpRoundsOpt = Annotated[
    int,
    typer.Option("--mcp-max-rounds", metavar="N", min=1,
                 help="With --mcp-config: rounds of tool calls before the answer is printed."),
]
McpAuditOpt = Annotated[
    Optional[Path],
    typer.Option("--mcp-audit-log", metavar="FILE", show_default=False,
                 help="With --mcp-config: append one JSON line per tool call to FILE."),
]
ToolChoiceOpt = Annotated[
    Optional[str],
    typer.Option("--tool-choice", metavar="CHOICE", show_default=False,
                 help="With --mcp-config: auto, none, required or a tool name (server__tool); a forced call "
                      "applies to the first round only."),
]


def run(ctx: typer.Context, prompt: PromptArg = None, model: RunModelOpt = None, system: SystemOpt = None,
        raw: RawOpt = False, image: ImageOpt = None, video: VideoOpt = None, fps: FpsOpt = None,
        max_frames: MaxFramesOpt = None, max_tokens: MaxTokensOpt = 512, temperature: TemperatureOpt = None,
        top_p: TopPOpt = None, top_k: TopKOpt = None, min_p: MinPOpt = None,
        repetition_penalty: RepetitionPenaltyOpt = None, presence_penalty: PresencePenaltyOpt = 0.0,
        frequency_penalty: FrequencyPenaltyOpt = 0.0, seed: SeedOpt = None, stop: StopOpt = None,
        stop_token_id: StopTokenIdOpt = None, logit_bias: LogitBiasOpt = None, ignore_eos: IgnoreEosOpt = False,
        logprobs: LogprobsOpt = 0, dtype: RunDtypeOpt = "auto", load_format: LoadFormatOpt = "auto",
        moe_top_k: MoeTopKOpt = None, tensor_parallel: TensorParallelOpt = 1,
        speculative: SpeculativeOpt = "off", num_draft_tokens: NumDraftTokensOpt = 8,
        grow_drafts: GrowDraftsOpt = None, draft_model: DraftModelOpt = None, draft_dtype: DraftDtypeOpt = "auto",
        kv_bits: KvBitsOpt = 0, kv_group_size: KvGroupSizeOpt = 64, max_model_len: MaxModelLenOpt = None,
        json_: RunJsonOpt = False, verbose: VerboseOpt = False, mcp_config: McpConfigOpt = None,
        mcp_max_rounds: McpRoundsOpt = 8, mcp_audit_log: McpAuditOpt = None,
        tool_choice: ToolChoiceOpt = None) -> None:
    """Generate a reply to PROMPT and stream it to stdout."""
    ensure_fast_blas()  # before stdin is read: it may re-execute this process
    from mlxctl.cli.tensor_parallel import check_run_options, follow, rank_group
    from mlxctl.generation import PromptSpec, lazy_engine

    check_run_options(tensor_parallel, images=image, videos=video)  # before any rank loads the model
    config = engine_config(ctx, (speculative, num_draft_tokens, draft_model, draft_dtype, grow_drafts),
                           (kv_bits, kv_group_size), max_model_len, tensor_parallel)
    group = rank_group(tensor_parallel, "run")
    if group is not None and group.rank() != 0:  # rank 0 reads the prompt and prints; this rank follows
        return follow(lazy_engine(model, dtype=dtype, load_format=load_format, moe_top_k=moe_top_k, group=group,
                                  config=config))
    out = output_for(ctx, json=json_)
    images = read_images(image)  # before the model loads: a bad file fails at once
    videos = read_videos(video, fps, max_frames)
    spec = PromptSpec(read_prompt(prompt, out), system, raw, images)
    sampling = _sampling(ctx, max_tokens, (temperature, top_p, top_k, min_p, repetition_penalty),
                         (presence_penalty, frequency_penalty, seed, stop, stop_token_id, logit_bias, ignore_eos),
                         logprobs)
    mcp = _mcp_options(mcp_config, mcp_max_rounds, mcp_audit_log, tool_choice, raw)
    _execute(out, model, (dtype, load_format, moe_top_k, group, config), spec, sampling, verbose, mcp, videos)


def _sampling(ctx: typer.Context, max_tokens: int, defaulted: tuple, fixed: tuple, logprobs: int) -> tuple:
    """(SamplingParams checked with the flags, the flags as SamplingDefaults). ``defaulted``:
    (--temperature, --top-p, --top-k, --min-p, --repetition-penalty), whose unset ones the model's
    generation_config.json fills in after it loads; ``fixed``: (--presence-penalty,
    --frequency-penalty, --seed, --stop, --stop-token-id, --logit-bias, --ignore-eos)."""
    from mlxctl.api.sampling_defaults import SamplingDefaults
    from mlxctl.cli.run_sampling import RUN_BUILT_IN
    from mlxctl.engine.sampling import SamplingParams

    temperature, top_p, top_k, min_p, repetition_penalty = defaulted
    presence_penalty, frequency_penalty, seed, stop, stop_token_id, logit_bias, ignore_eos = fixed
    field = "--max-tokens/-n" if given_on_command_line(ctx, "max_tokens") else None  # the default is capped
    flags = SamplingDefaults(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                             repetition_penalty=repetition_penalty)  # the rest: after the model loads
    params = SamplingParams(
        max_tokens=max_tokens, max_tokens_field=field, **flags.over(RUN_BUILT_IN).sampling(),
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty, seed=seed, stop=tuple(stop or ()), ignore_eos=ignore_eos,
        logprobs=logprobs > 0, top_logprobs=logprobs, stop_token_ids=tuple(stop_token_id or ()),
        logit_bias=parse_logit_bias(logit_bias or ()),
    )
    params.validate()
    return params, flags


def parse_logit_bias(values: list[str] | tuple[str, ...]) -> tuple[tuple[int, float], ...]:
    """``--logit-bias ID=BIAS`` values as (token id, bias) pairs; a malformed one is a one-line error."""
    pairs = []
    for value in values:
        token, sep, bias = value.partition("=")
        try:
            if not sep:
                raise ValueError
            pairs.append((int(token), float(bias)))
        except ValueError:
            raise BadInputError(f"--logit-bias {value!r} is not ID=BIAS",
                                hint="for example --logit-bias 28=-100") from None
    return tuple(pairs)


def _mcp_options(config: Path | None, max_rounds: int, audit_log: Path | None, tool_choice: str | None,
                 raw: bool) -> dict | None:
    """The MCP loop's settings, the config checked before the model loads; None without --mcp-config."""
    if config is None:
        if audit_log is not None or tool_choice is not None:
            flag = "--tool-choice" if tool_choice is not None else "--mcp-audit-log"
            raise BadInputError(f"{flag} needs --mcp-config")
        return None
    if raw:
        raise BadInputError("--mcp-config needs the chat template", hint="drop --raw")
    from mlxctl.mcp import load_config

    return {"config": load_config(config.expanduser()), "max_rounds": max_rounds, "tool_choice": tool_choice,
            "audit_log": str(audit_log.expanduser()) if audit_log else None}


def read_images(paths: list[Path] | None) -> tuple:
    """Each --image file, read and decoded (a one-line error naming the file otherwise)."""
    if not paths:
        return ()
    from mlxctl.vision.images import read_image_file

    return tuple(read_image_file(path, f"--image {path}") for path in paths)


def read_videos(paths: list[Path] | None, fps: float | None, max_frames: int | None) -> tuple:
    """Each --video file, decoded into its sampled frames (a one-line error naming it otherwise)."""
    if not paths:
        if fps is not None or max_frames is not None:
            raise BadInputError(f"{'--fps' if fps is not None else '--max-frames'} needs --video")
        return ()
    from mlxctl.vision.sampling import VideoSampling
    from mlxctl.vision.video import read_video_file

    default = VideoSampling()
    try:
        sampling = VideoSampling(default.fps if fps is None else fps,
                                 default.max_frames if max_frames is None else max_frames).check()
    except ValueError as exc:  # "fps must be ..." -> "--fps must be ..."
        raise BadInputError("--" + str(exc).replace("max_frames", "max-frames", 1)) from None
    return tuple(read_video_file(path, f"--video {path}", sampling) for path in paths)


def with_videos(engine, spec, videos: tuple):
    """The prompt with each video's labelled frame placeholders ("Frame at 1 s: <image>") after
    the --image placeholders and before the text; the frames join the images in that order."""
    if not videos:
        return spec
    import dataclasses

    from mlxctl.vision import image_token, images_refused
    from mlxctl.vision.video import video_prompt

    token = image_token(engine.model)
    if token is None:
        raise images_refused(engine.model)
    head = "" if spec.text.count(token) == len(spec.images) else "".join(f"{token}\n" for _ in spec.images)
    frames = "".join(video_prompt(v, token) + "\n" for v in videos)
    return dataclasses.replace(spec, text=head + frames + spec.text,
                               images=(*spec.images, *(f for v in videos for f in v.frames)))


def read_prompt(words: list[str] | None, out: Output) -> str:
    """The prompt from the arguments, or all of stdin (less trailing newlines) for none or '-'."""
    if words and words != ["-"]:
        text = " ".join(words)
    elif words == ["-"] or not out.stdin_is_tty:
        text = out.read_stdin().rstrip("\n")  # like $(...): the newline `echo` adds is not prompt
    else:
        raise BadInputError("no prompt given", hint="pass it as an argument or pipe it on stdin")
    if not text.strip():
        raise BadInputError("the prompt is empty")
    return text


def _execute(out: Output, model: str | None, weights: tuple, spec, sampling: tuple, verbose: bool,
             mcp: dict | None = None, videos: tuple = ()) -> None:
    """``sampling``: (SamplingParams checked with the flags, the flags as SamplingDefaults)."""
    from mlxctl.cli.run_output import print_stream
    from mlxctl.cli.run_sampling import with_model_defaults
    from mlxctl.generation import generate, open_engine

    dtype, load_format, moe_top_k, group, config = weights
    engine = open_engine(model, dtype=dtype, progress=out.message, load_format=load_format, moe_top_k=moe_top_k,
                         group=group, config=config)
    try:
        params, line = with_model_defaults(*sampling, engine.model)
        if verbose:
            out.message(line)
        spec = with_videos(engine, spec, videos)
        if mcp is not None:
            from mlxctl.cli.mcp_run import run_with_mcp

            return run_with_mcp(out, engine, spec, params, verbose=verbose, **mcp)
        stream = generate(engine, spec, params)
        try:
            print_stream(out, stream, engine.model.name, verbose)
        except KeyboardInterrupt:
            stream.abort()
            raise
    finally:
        engine.shutdown()
