"""`mlxctl serve`: the OpenAI-, Anthropic- and Responses-compatible HTTP server."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import typer

from mlxctl.cli.blas import ensure_fast_blas
from mlxctl.cli.context import given_on_command_line, output_for
from mlxctl.cli.memory import (KvBitsOpt, KvGroupSizeOpt, MaxModelLenOpt, MemoryBudgetOpt, engine_flags, memory_budget,
                               shared_budget)
from mlxctl.cli.options import (DEFAULT_HOST, DEFAULT_PORT, DraftDtypeOpt, DraftModelOpt, GrowDraftsOpt, HostOpt,
                                LoadFormatOpt, MoeTopKOpt, NumDraftTokensOpt, PortOpt, SpeculativeOpt,
                                TensorParallelOpt)
from mlxctl.cli.output import Output
from mlxctl.cli.serve_options import (AllowUnconfiguredOpt, AuthHealthOpt, BitsOpt, BlockOpt, BodyOpt, CacheDirGbOpt,
                                      CacheDirOpt, ChunkOpt, CorsOpt, DtypeOpt, EmbedModelOpt, GraceOpt,
                                      HeaderTimeoutOpt, IntervalOpt, KeepAliveOpt, KeyFileOpt, KeyOpt, LogFileOpt,
                                      LogOpt, MaxConnectionsOpt, MaxLoadedOpt, McpAuditOpt, McpConfigOpt,
                                      McpRoundsOpt, MediaPathOpt, MetricsNamesOpt, ModelOpt, ModelsConfigOpt, NameOpt,
                                      PinOpt, PinPrimaryOpt, PrefixGbOpt, PrefixOpt, RateOpt, ReasoningParserOpt,
                                      RemoteMediaOpt, RetriesOpt, SeqsOpt, SsePingOpt, StepMsOpt, SttModelOpt,
                                      TimeoutOpt, ToolParserOpt, TtsModelOpt, TuiOpt, WaitingOpt, WarmNOpt, WarmOpt)
from mlxctl.cli.serve_sampling import MaxTokensOpt, TemperatureOpt, TopKOpt, TopPOpt, sampling_defaults
from mlxctl.cli.tensor_parallel import check_serve_options
from mlxctl.errors import BadInputError

LOG_FORMATS = ("human", "json")


def serve(ctx: typer.Context, model: ModelOpt = None, models_config: ModelsConfigOpt = None,
          allow_unconfigured_models: AllowUnconfiguredOpt = False, host: HostOpt = DEFAULT_HOST,
          port: PortOpt = DEFAULT_PORT, served_model_name: NameOpt = None, dtype: DtypeOpt = "auto",
          load_format: LoadFormatOpt = "auto", moe_top_k: MoeTopKOpt = None, max_num_seqs: SeqsOpt = 16,
          prefill_chunk: ChunkOpt = 0, prefill_step_ms: StepMsOpt = None, speculative: SpeculativeOpt = "off",
          num_draft_tokens: NumDraftTokensOpt = 8, grow_drafts: GrowDraftsOpt = None,
          draft_model: DraftModelOpt = None, draft_dtype: DraftDtypeOpt = "auto", kv_bits: KvBitsOpt = 0,
          kv_group_size: KvGroupSizeOpt = 64, max_model_len: MaxModelLenOpt = None,
          memory_budget_gb: MemoryBudgetOpt = "0", max_waiting: WaitingOpt = 256, stream_interval: IntervalOpt = 1,
          sse_ping_interval: SsePingOpt = "5", default_temperature: TemperatureOpt = None,
          default_top_p: TopPOpt = None, default_top_k: TopKOpt = None, default_max_tokens: MaxTokensOpt = None,
          api_key: KeyOpt = None, api_key_file: KeyFileOpt = None, auth_health: AuthHealthOpt = False,
          cors_origin: CorsOpt = None, rate_limit: RateOpt = 0, max_body_mb: BodyOpt = 8.0,
          request_timeout: TimeoutOpt = 600.0, header_timeout: HeaderTimeoutOpt = 30.0,
          max_connections: MaxConnectionsOpt = 512, drain_grace: GraceOpt = 30.0, log_format: LogOpt = "human",
          metrics_names: MetricsNamesOpt = "mlxctl", prefix_cache: PrefixOpt = True,
          prefix_cache_gb: PrefixGbOpt = 0.0, prefix_block_size: BlockOpt = 64, prefix_cache_bits: BitsOpt = 0,
          cache_dir: CacheDirOpt = None, cache_dir_gb: CacheDirGbOpt = 0.0, warm_prompts: WarmOpt = None,
          warm_prompts_concurrency: WarmNOpt = 2, tool_call_parser: ToolParserOpt = "auto",
          reasoning_parser: ReasoningParserOpt = "auto", max_retries: RetriesOpt = 3,
          max_loaded_gb: MaxLoadedOpt = 0.0, keep_alive: KeepAliveOpt = "5m", pin: PinOpt = None,
          pin_primary: PinPrimaryOpt = True, tui: TuiOpt = False, log_file: LogFileOpt = None,
          mcp_config: McpConfigOpt = None, mcp_max_rounds: McpRoundsOpt = 8, mcp_audit_log: McpAuditOpt = None,
          embedding_model: EmbedModelOpt = None, stt_model: SttModelOpt = None, tts_model: TtsModelOpt = None,
          allowed_local_media_path: MediaPathOpt = None, allow_remote_media: RemoteMediaOpt = False,
          tensor_parallel: TensorParallelOpt = 1) -> None:
    """Serve a model over OpenAI- and Anthropic-compatible HTTP APIs.

    Listens at once (/health answers 503 until the model is loaded); SIGTERM or Ctrl-C drains
    requests in flight and exits 0.
    """
    ensure_fast_blas()
    _check_flags(log_format, prefix_cache_bits, prefix_cache, cache_dir, warm_prompts, log_file, tui, metrics_names)
    engine_settings = {**engine_flags(ctx, (speculative, num_draft_tokens, draft_model, draft_dtype, grow_drafts),
                                      (kv_bits, kv_group_size), max_model_len, tensor_parallel, prefix_cache_bits),
                       **shared_budget(memory_budget(memory_budget_gb), pin_primary)}
    (first_name, first), extras = split_models(model)
    settings = _settings(served_model_name or first_name or default_name(first), **locals())
    prefix = _prefix_config(prefix_cache, prefix_block_size, prefix_cache_gb, prefix_cache_bits, cache_dir,
                            cache_dir_gb)
    residency = _residency(extras, settings.model_name, models_config, pin, max_loaded_gb, keep_alive, tui, log_file,
                           allow_unconfigured_models)
    check_serve_options(tensor_parallel, extra_models=len(residency[0]), cache_dir=cache_dir,
                        prefill_step_ms=prefill_step_ms, pin_primary=pin_primary,
                        allow_unconfigured=allow_unconfigured_models)
    _execute(output_for(ctx), first, (dtype, load_format, moe_top_k), settings, max_num_seqs,
             ((prefill_chunk, prefill_step_ms), prefix, max_retries, tensor_parallel, engine_settings), residency)


def _check_flags(log_format: str, bits: int, prefix_cache: bool, cache_dir: Path | None, warm_prompts: Path | None,
                 log_file: Path | None, tui: bool, metrics_names: str) -> None:
    """Flag values and combinations refused before anything is read or loaded."""
    if log_format not in LOG_FORMATS:
        raise BadInputError(f"unknown log format {log_format!r}", hint="use human or json")
    if bits not in (0, 4, 8):
        raise BadInputError(f"--prefix-cache-bits must be 0, 4 or 8, got {bits}")
    if (cache_dir or warm_prompts) and not prefix_cache:
        raise BadInputError("--cache-dir and --warm-prompts need the prefix cache", hint="drop --no-prefix-cache")
    if log_file is not None and not tui:
        raise BadInputError("--log-file goes with --tui (without it, request logs go to stderr)")
    if tui and not sys.stdout.isatty():
        raise BadInputError("'serve --tui' needs a terminal", hint="drop --tui, and watch it with mlxctl top")
    check_metrics_names(metrics_names)


def check_metrics_names(naming: str) -> None:
    from mlxctl.server.metrics_names import NAMINGS

    if naming not in NAMINGS:
        raise BadInputError(f"--metrics-names must be mlxctl, vllm or both, got {naming!r}",
                            hint="vllm exports vLLM's own series names, for its Grafana dashboards")


def ping_interval(text: str) -> float:
    """--sse-ping-interval in seconds: a finite number, 0 or more (0: no keep-alives)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise BadInputError(f"--sse-ping-interval must be a number of seconds, 0 or more, got {text!r}",
                            hint="5 sends a keep-alive after 5 s of silence; 0 turns them off")
    return seconds


def _settings(model_name: str, *, ctx: typer.Context, host: str, port: int, api_key: str | None,
              api_key_file: Path | None, auth_health: bool, cors_origin: list[str] | None, max_body_mb: float,
              rate_limit: int, max_waiting: int, request_timeout: float, header_timeout: float, max_connections: int,
              stream_interval: int, sse_ping_interval: str, drain_grace: float, log_format: str, metrics_names: str,
              warm_prompts: Path | None, warm_prompts_concurrency: int, tool_call_parser: str, reasoning_parser: str,
              mcp_config: Path | None, mcp_max_rounds: int, mcp_audit_log: Path | None, embedding_model: str | None,
              stt_model: str | None, tts_model: str | None, allowed_local_media_path: Path | None,
              allow_remote_media: bool, pin_primary: bool, default_temperature: str | None,
              default_top_p: str | None, default_top_k: str | None, default_max_tokens: str | None, **_) -> Any:
    """ServeSettings from serve's options, by name (``_``: the engine's and the pool's), the files
    read and the references checked."""
    from mlxctl.server.settings import ServeSettings
    from mlxctl.server.warm import load_warm_prompts

    key = read_api_key(api_key, api_key_file, given_on_command_line(ctx, "api_key"))
    ping = ping_interval(sse_ping_interval)
    sampling = sampling_defaults(default_temperature, default_top_p, default_top_k, default_max_tokens)
    warm = tuple(load_warm_prompts(warm_prompts)) if warm_prompts else ()
    check_parsers(tool_call_parser, reasoning_parser)
    mcp = check_mcp_options(mcp_config, mcp_audit_log)
    check_embedding_model(embedding_model)
    check_stt_model(stt_model)
    check_tts_model(tts_model)
    return ServeSettings(
        host=host, port=port, model_name=model_name, api_key=key, auth_health=auth_health,
        cors_origins=tuple(cors_origin or ()), max_body_bytes=int(max_body_mb * 1024 * 1024),
        rate_limit_per_minute=rate_limit, max_waiting=max_waiting, request_timeout_s=request_timeout,
        header_timeout_s=header_timeout, max_connections=max_connections, stream_interval=stream_interval,
        sse_ping_interval_s=ping, drain_grace_s=drain_grace, log_format=log_format, metrics_names=metrics_names,
        warm_prompts=warm, warm_prompts_concurrency=warm_prompts_concurrency, tool_call_parser=tool_call_parser,
        reasoning_parser=reasoning_parser, mcp_config=mcp, mcp_max_rounds=mcp_max_rounds,
        mcp_audit_log=str(mcp_audit_log.expanduser()) if mcp_audit_log else None,
        embedding_model=embedding_model.strip() if embedding_model else None,
        stt_model=stt_model.strip() if stt_model else None, tts_model=tts_model.strip() if tts_model else None,
        allowed_local_media_path=check_media_path(allowed_local_media_path), allow_remote_media=allow_remote_media,
        pin_primary=pin_primary, sampling_defaults=sampling)


def _residency(extras: list, model_name: str, models_config: Path | None, pin: list[str] | None,
               max_loaded_gb: float, keep_alive: str, tui: bool, log_file: Path | None,
               allow_unconfigured: bool) -> tuple:
    """What `_execute` needs for the resident pool: (the extra models' specs, the --max-loaded-gb
    budget in bytes, --keep-alive in seconds, --tui, --log-file, --allow-unconfigured-models)."""
    from mlxctl.cli.serve_models import load_models_config, pool_specs
    from mlxctl.server.residency import parse_keep_alive

    specs = pool_specs(extras, load_models_config(models_config) if models_config else [], pin, model_name)
    return (specs, int(max_loaded_gb * (1 << 30)), parse_keep_alive(keep_alive, "--keep-alive"), tui,
            str(log_file) if log_file else None, allow_unconfigured)


def _prefix_config(enabled: bool, block_size: int, gb: float, bits: int, cache_dir: Path | None, dir_gb: float):
    from mlxctl.engine.prefix_config import PrefixConfig

    return PrefixConfig(enabled=enabled, block_size=block_size, max_bytes=int(gb * (1 << 30)), bits=bits,
                        cache_dir=str(cache_dir) if cache_dir else None, disk_max_bytes=int(dir_gb * (1 << 30)))


def split_models(models: list[str] | None) -> tuple[tuple[str | None, str | None], list[tuple[str, str]]]:
    """``-m`` values as (name, ref): ``NAME=MODEL`` names a model, else its default name is used.
    The first is the primary model; the rest are served from the resident pool."""
    import re

    pairs = []
    for value in models or [None]:
        match = re.fullmatch(r"([A-Za-z0-9._:-]+)=(.+)", value) if value else None
        pairs.append((match.group(1), match.group(2)) if match else (None, value))
    extras, seen = [], set()
    for name, ref in pairs[1:]:
        name = name or default_name(ref)
        if name in seen:
            raise BadInputError(f"two models are served as {name!r}", hint="name them with -m NAME=MODEL")
        seen.add(name)
        extras.append((name, ref))
    return pairs[0], extras


def check_media_path(path: Path | None) -> str | None:
    if path is None:
        return None
    folder = path.expanduser()
    if not folder.is_dir():
        raise BadInputError(f"--allowed-local-media-path {path}: no such folder")
    return str(folder.resolve())


def check_tts_model(ref: str | None) -> None:
    """--tts-model checked before anything loads (a chat model or a missing folder is one line)."""
    if ref is not None:
        from mlxctl.audio.models import check_tts_ref

        check_tts_ref(ref)


def check_stt_model(ref: str | None) -> None:
    """--stt-model checked before anything loads (a chat model or a missing folder is one line)."""
    if ref is not None:
        from mlxctl.audio.models import check_stt_ref

        check_stt_ref(ref)


def check_embedding_model(ref: str | None) -> None:
    """--embedding-model checked before anything loads (a chat model or a missing folder is one line)."""
    if ref is not None:
        from mlxctl.embed.resolve import check_ref

        check_ref(ref)


def check_parsers(tool: str, reasoning: str) -> None:
    """Unknown format names fail before the model loads."""
    from mlxctl.api import reasoning as reasoning_formats
    from mlxctl.api import toolcalls

    if tool not in ("auto", "none"):
        toolcalls.get_parser(tool)
    if reasoning not in ("auto", "none"):
        reasoning_formats.get_parser(reasoning)


def check_mcp_options(config: Path | None, audit_log: Path | None) -> str | None:
    """--mcp-config checked before the model loads (a bad file is one line and exit 4); its path."""
    if config is None:
        if audit_log is not None:
            raise BadInputError("--mcp-audit-log needs --mcp-config")
        return None
    from mlxctl.mcp import load_config

    path = config.expanduser()
    load_config(path)
    return str(path.resolve())


def default_name(model: str | None) -> str:
    """The id clients see: the catalog name, a folder's or file's stem, or the repo id."""
    from mlxctl.models.catalog import DEFAULT_CHAT_MODEL

    if model is None:
        return DEFAULT_CHAT_MODEL
    path = Path(model).expanduser()
    return path.stem if path.exists() else model.strip()


def read_api_key(key: str | None, key_file: Path | None, key_from_flag: bool = False) -> str | None:
    """The key from --api-key, MLXCTL_API_KEY or --api-key-file (which beats the variable)."""
    if key_file is None:
        return key or None
    if key_from_flag:
        raise BadInputError("give --api-key or --api-key-file, not both")
    try:
        text = key_file.expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BadInputError(f"cannot read the API key file {key_file}: {exc.strerror}") from exc
    if not text:
        raise BadInputError(f"the API key file {key_file} is empty")
    return text


def _execute(out: Output, model: str | None, weights: tuple, settings, max_num_seqs: int,
             engine_opts: tuple, residency: tuple = ((), 0, 300.0, False, None, False)) -> None:
    from mlxctl.engine.engine import EngineConfig
    from mlxctl.engine.scheduler import SchedulerConfig
    from mlxctl.generation import lazy_engine
    from mlxctl.server import lifecycle
    from mlxctl.server.app import init_app
    from mlxctl.cli.serve_models import EngineDefaults, build_pool
    from mlxctl.cli.tensor_parallel import follow, rank_group

    (prefill_chunk, prefill_step_ms), prefix, max_retries, tensor_parallel, engine_flags = engine_opts
    group = rank_group(tensor_parallel, "serve")
    config = EngineConfig(SchedulerConfig(max_num_seqs=max_num_seqs, prefill_chunk=prefill_chunk,
                                          max_prefilling=min(8, max_num_seqs), prefill_step_ms=prefill_step_ms),
                          prefix=prefix, max_retries=max_retries, **engine_flags)
    dtype, load_format, moe_top_k = weights
    specs, budget, keep_alive_s, tui, log_file, allow_unconfigured = residency
    progress = None if tui else out.message  # nothing may write over the live view
    if group is not None and group.rank() != 0:
        follow(lazy_engine(model, dtype=dtype, config=config, load_format=load_format, moe_top_k=moe_top_k,
                           group=group))
        return
    engine = lazy_engine(model, dtype=dtype, progress=progress, config=config, load_format=load_format,
                         moe_top_k=moe_top_k, group=group)
    app = init_app(engine, settings, build_pool(specs, budget, keep_alive_s, EngineDefaults(
        dtype, load_format, moe_top_k, config, progress), allow_unconfigured))
    if tui:
        lifecycle.run_with_view(app, _top, log_file)
        return
    lifecycle.run(app, announce=lambda url: out.message(f"mlxctl: listening on {url}"))


def _top(url: str, api_key: str | None) -> None:
    """`serve --tui`'s view: `mlxctl top` on the server."""
    from mlxctl.tui.top import TopApp

    TopApp(url=url, api_key=api_key).run()
