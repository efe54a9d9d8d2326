"""`mlxctl serve`'s own options (those it shares with other commands are in options.py and memory.py;
its --default-* sampling flags in serve_sampling.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ModelOpt = Annotated[
    Optional[list[str]],
    typer.Option("--model", "-m", metavar="[NAME=]MODEL", show_default=False,
                 help="Catalog name, model folder, .gguf file or Hugging Face repo id (default: smollm2-135m). "
                      "Repeat it to serve several: the first is loaded at start, the others when a request names "
                      "them."),
]
ModelsConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--models-config", metavar="FILE", show_default=False,
                 help="More models to serve beside -m, from a JSON or YAML file: a 'models' list of {name, ref, "
                      "pin, keep_alive, dtype, load_format, moe_top_k, max_num_seqs, prefill_chunk, max_model_len, "
                      "temperature, top_p, top_k, min_p, max_tokens} (see docs/serve.md)."),
]
AllowUnconfiguredOpt = Annotated[
    bool,
    typer.Option("--allow-unconfigured-models",
                 help="Let a request name a model that is not configured: a catalog chat model or a Hugging Face "
                      "repo id (never a local path), fetched if missing and loaded into the pool. Off: such a "
                      "request is a 404 and nothing is downloaded."),
]
MaxLoadedOpt = Annotated[
    float,
    typer.Option("--max-loaded-gb", metavar="GB", min=0.0,
                 help="Weights of all the models kept loaded at once, the primary's included: idle extra models "
                      "are unloaded, least recently used first, to make room before a load; a model that cannot "
                      "fit is refused (0: no limit)."),
]
KeepAliveOpt = Annotated[
    str,
    typer.Option("--keep-alive", metavar="DURATION",
                 help="How long an extra model stays loaded after its last request (300, 5m, 1h; -1: forever)."),
]
NameOpt = Annotated[
    Optional[str],
    typer.Option("--served-model-name", metavar="NAME", show_default=False,
                 help="The model id clients use (default: the model reference)."),
]
DtypeOpt = Annotated[
    str,
    typer.Option("--dtype", metavar="DTYPE", help="Weights dtype: auto, native, float32, float16, bfloat16."),
]
SeqsOpt = Annotated[
    int,
    typer.Option("--max-num-seqs", metavar="N", min=1, help="Requests prefilling or decoding at once."),
]
ChunkOpt = Annotated[
    int,
    typer.Option("--prefill-chunk", metavar="N", min=0,
                 help="Tokens per engine step, decode rows (one each) and prompt chunks together; prompts keep at "
                      "least half; a wave of whole short prompts may take up to 4 times it; 0: 512 on CPU, 4096 on "
                      "GPU."),
]
StepMsOpt = Annotated[
    Optional[int],
    typer.Option("--prefill-step-ms", metavar="MS", min=0, show_default=False,
                 help="While requests are decoding, size each step's prompt work to take about this long (from its "
                      "measured cost so far), so they keep getting tokens behind a long prompt; 0: --prefill-chunk "
                      "alone. Default: 500 on a GPU, 2000 on a CPU."),
]
WaitingOpt = Annotated[
    int,
    typer.Option("--max-waiting", metavar="N", min=0, help="Queued requests before new ones get 503."),
]
IntervalOpt = Annotated[int, typer.Option("--stream-interval", metavar="N", min=1, help="Tokens per streamed chunk.")]
SsePingOpt = Annotated[
    str,
    typer.Option("--sse-ping-interval", metavar="SECONDS",
                 help="A streamed response with nothing sent for this long (queued, prefilling) gets a keep-alive: "
                      "an SSE comment, Anthropic's ping event on /v1/messages; 0: none."),
]
KeyOpt = Annotated[
    Optional[str],
    typer.Option("--api-key", metavar="KEY", envvar="MLXCTL_API_KEY", show_default=False,
                 help="Require this key (Authorization: Bearer or x-api-key)."),
]
KeyFileOpt = Annotated[
    Optional[Path],
    typer.Option("--api-key-file", metavar="PATH", show_default=False, help="Read the API key from this file."),
]
AuthHealthOpt = Annotated[
    bool,
    typer.Option("--auth-health/--no-auth-health", help="Whether /health and /metrics need the key too."),
]
CorsOpt = Annotated[
    Optional[list[str]],
    typer.Option("--cors-origin", metavar="ORIGIN", show_default=False,
                 help="Allow browser requests from ORIGIN (repeatable; * for any). CORS is off without it."),
]
RateOpt = Annotated[
    int,
    typer.Option("--rate-limit", metavar="N", min=0, help="Requests per minute per client address; 0 is no limit."),
]
BodyOpt = Annotated[float, typer.Option("--max-body-mb", metavar="MB", min=0.001, help="Largest request body, in MiB.")]
TimeoutOpt = Annotated[
    float,
    typer.Option("--request-timeout", metavar="SECONDS", min=0.001,
                 help="A request still running after this is ended with a timeout error."),
]
HeaderTimeoutOpt = Annotated[
    float,
    typer.Option("--header-timeout", metavar="SECONDS", min=0.001,
                 help="A connection that has not sent a whole request line and headers this long after it opened, "
                      "or after its previous response, is closed (slow or idle clients); bodies and streamed "
                      "responses are not cut."),
]
MaxConnectionsOpt = Annotated[
    int,
    typer.Option("--max-connections", metavar="N", min=1,
                 help="Open client connections at once; past this a new one gets 503 and is closed (keep it below "
                      "the open-files limit, ulimit -n)."),
]
GraceOpt = Annotated[
    float,
    typer.Option("--drain-grace", metavar="SECONDS", min=0.0,
                 help="On SIGTERM or Ctrl-C: how long requests in flight may take to finish."),
]
PrefixOpt = Annotated[
    bool,
    typer.Option("--prefix-cache/--no-prefix-cache", help="Reuse the KV of prompt prefixes seen before."),
]
PrefixGbOpt = Annotated[
    float,
    typer.Option("--prefix-cache-gb", metavar="GB", min=0.0,
                 help="Memory for cached prefix blocks; 0: a tenth of RAM, at most 4 GiB."),
]
BlockOpt = Annotated[
    int,
    typer.Option("--prefix-block-size", metavar="N", min=1, help="Tokens per prefix-cache block."),
]
BitsOpt = Annotated[
    int,
    typer.Option("--prefix-cache-bits", metavar="BITS",
                 help="Keep cached prefix blocks quantised to 8 or 4 bits (smaller, not bit-exact); 0: as computed."),
]
CacheDirOpt = Annotated[
    Optional[Path],
    typer.Option("--cache-dir", metavar="DIR", show_default=False,
                 help="Spill evicted prefix blocks to this directory and reuse them across restarts."),
]
CacheDirGbOpt = Annotated[
    float,
    typer.Option("--cache-dir-gb", metavar="GB", min=0.0,
                 help="Size cap of --cache-dir; 0: a tenth of the free disk, at most 20 GiB."),
]
WarmOpt = Annotated[
    Optional[Path],
    typer.Option("--warm-prompts", metavar="FILE", show_default=False,
                 help="Prefill these prompts at start (JSON list or lines: system-prompt strings, {messages} or "
                      "{prompt})."),
]
WarmNOpt = Annotated[
    int,
    typer.Option("--warm-prompts-concurrency", metavar="N", min=1, help="Warm prompts prefilled at once."),
]
ToolParserOpt = Annotated[
    str,
    typer.Option("--tool-call-parser", metavar="NAME",
                 help="Tool-call format: auto (from the chat template), none, or a format name (docs/tools.md)."),
]
ReasoningParserOpt = Annotated[
    str,
    typer.Option("--reasoning-parser", metavar="NAME",
                 help="Reasoning format: auto, none, or a format name (docs/tools.md)."),
]
RetriesOpt = Annotated[
    int,
    typer.Option("--max-retries", metavar="N", min=0,
                 help="Failed engine steps a request may live through (it resumes from its checkpoint) before it "
                      "ends with an error."),
]
PinPrimaryOpt = Annotated[
    bool,
    typer.Option("--pin-primary/--no-pin-primary",
                 help="Keep the primary model (the first -m) loaded for the server's life. --no-pin-primary: it "
                      "joins the pool like an extra model: unloaded after --keep-alive idle (or a request's "
                      "keep_alive), or to make room under --max-loaded-gb, and loaded again by the next request "
                      "that names it."),
]
PinOpt = Annotated[
    Optional[list[str]],
    typer.Option("--pin", metavar="NAME", show_default=False,
                 help="Never unload this extra model once loaded (repeatable)."),
]
TuiOpt = Annotated[
    bool,
    typer.Option("--tui", help="Show the live view (mlxctl top) in this terminal; quitting it stops the server."),
]
LogFileOpt = Annotated[
    Optional[Path],
    typer.Option("--log-file", metavar="FILE", show_default=False, help="With --tui: append request logs to FILE."),
]
LogOpt = Annotated[
    str,
    typer.Option("--log-format", metavar="FORMAT", help="Request log lines on stderr: human or json."),
]
MetricsNamesOpt = Annotated[
    str,
    typer.Option("--metrics-names", metavar="NAMING",
                 help="/metrics series names: mlxctl (mlxctl:...), vllm (vLLM's own vllm:... names, for its "
                      "Grafana dashboards) or both."),
]
McpConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--mcp-config", metavar="FILE", show_default=False,
                 help="MCP servers file (JSON or YAML with mcpServers): the server runs their tools for chat "
                      "requests that opt in (see docs/mcp.md)."),
]
McpRoundsOpt = Annotated[
    int,
    typer.Option("--mcp-max-rounds", metavar="N", min=1,
                 help="Rounds of MCP tool calls per chat request before the answer is returned."),
]
McpAuditOpt = Annotated[
    Optional[Path],
    typer.Option("--mcp-audit-log", metavar="FILE", show_default=False,
                 help="Append one JSON line per MCP tool call to FILE."),
]
EmbedModelOpt = Annotated[
    Optional[str],
    typer.Option("--embedding-model", metavar="REF", show_default=False,
                 help="Also serve /v1/embeddings and /v1/rerank with this embedding model (e.g. minilm-l6), loaded "
                      "at start on its own thread."),
]
TtsModelOpt = Annotated[
    Optional[str],
    typer.Option("--tts-model", metavar="REF", show_default=False,
                 help="Text-to-speech model for /v1/audio/speech and /v1/audio/voices, loaded at start on its own "
                      "thread (catalog name, store name, Kokoro ONNX or mlx-audio Kokoro folder; default: "
                      "kokoro-82m, converted and loaded on the first request)."),
]
SttModelOpt = Annotated[
    Optional[str],
    typer.Option("--stt-model", metavar="REF", show_default=False,
                 help="Speech-to-text model for /v1/audio/transcriptions, loaded at start on its own thread "
                      "(catalog name, store name, faster-whisper or mlx-audio Whisper folder; default: "
                      "whisper-tiny-en, converted and loaded on the first request)."),
]
MediaPathOpt = Annotated[
    Optional[Path],
    typer.Option("--allowed-local-media-path", metavar="DIR", show_default=False,
                 help="Let chat requests name images in DIR with file:// URLs (refused without it; see "
                      "docs/vision.md)."),
]
RemoteMediaOpt = Annotated[
    bool,
    typer.Option("--allow-remote-media",
                 help="Let chat requests name images and videos by http(s) URL, fetched by the server from public "
                      "internet addresses only (refused without it; see docs/vision.md)."),
]
