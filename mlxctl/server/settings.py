"""ServeSettings: everything `mlxctl serve` is configured with, validated once."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlxctl.api.sampling_defaults import SamplingDefaults


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    model_name: str = "default"  # the id /v1/models lists and requests may name
    api_key: str | None = None  # when set: Authorization: Bearer / x-api-key required
    auth_health: bool = False  # whether /health and /metrics need the key too
    cors_origins: tuple[str, ...] = ()  # empty: CORS off
    max_body_bytes: int = 8 * 1024 * 1024
    rate_limit_per_minute: int = 0  # per client address; 0: off
    max_waiting: int = 256  # requests queued in the engine before new ones get 503
    request_timeout_s: float = 600.0  # a request still running after this is aborted
    header_timeout_s: float = 30.0  # a connection waiting for a request's headers longer is closed
    max_connections: int = 512  # open connections at once; past this a new one gets 503
    stream_interval: int = 1  # tokens per streamed chunk
    sse_ping_interval_s: float = 5.0  # a streamed response silent this long gets a keep-alive; 0: none
    drain_grace_s: float = 30.0  # SIGTERM: how long in-flight requests may take to finish
    log_format: str = "human"  # human | json
    aliases: tuple[str, ...] = field(default=())  # other model names accepted in requests
    response_store_size: int = 1024  # past /v1/responses kept for previous_response_id (LRU)
    tool_call_parser: str = "auto"  # a toolcalls registry name, auto (from the chat template) or none
    reasoning_parser: str = "auto"  # a reasoning registry name, auto or none
    warm_prompts: tuple = ()  # server.warm.WarmPrompt entries prefilled once the model is loaded
    warm_prompts_concurrency: int = 2  # of those, how many in flight at once
    mcp_config: str | None = None  # an MCP servers file (--mcp-config): enables the MCP tool loop
    mcp_max_rounds: int = 8  # rounds of MCP tool calls per chat request
    mcp_audit_log: str | None = None  # a file that gets one JSON line per MCP call
    embedding_model: str | None = None  # --embedding-model: serves /v1/embeddings and /v1/rerank
    stt_model: str | None = None  # --stt-model: /v1/audio/transcriptions' model (None: whisper-tiny-en, on first use)
    tts_model: str | None = None  # --tts-model: /v1/audio/speech's model (None: kokoro-82m, on first use)
    pin_primary: bool = True  # False (--no-pin-primary): the primary model joins the pool (keep-alive, idle unload)
    allowed_local_media_path: str | None = None  # file:// image URLs may name files in this folder (None: refused)
    allow_remote_media: bool = False  # http(s) image/video URLs are fetched (public addresses only); False: refused
    sampling_defaults: SamplingDefaults = field(default_factory=SamplingDefaults)  # serve --default-*
    metrics_names: str = "mlxctl"  # /metrics series names: mlxctl, vllm or both (server/metrics_names.py)
