"""Ollama request bodies (/api/chat, /api/generate, /api/embed, /api/show, /api/pull) as pydantic models.

Field names and defaults are Ollama's (docs/api.md of ollama/ollama): ``stream`` defaults to
true, sampling goes in ``options``. Unknown fields are refused (``extra="forbid"``), so the 400
names them. ``options`` takes Ollama's option names only (an unknown name is a 400 naming it,
where Ollama logs a warning and ignores it): the sampling ones are mapped onto the engine
(``ollama_translate.py``), the hardware and memory hints of llama.cpp (``num_gpu``,
``num_thread``, ...) are accepted with no effect, and the samplers mlxctl does not have
(``mirostat``, ``typical_p``, ``tfs_z``) are accepted only at their neutral values.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from mlxctl.api.null_fields import NullMeansAbsent
from mlxctl.api.openai_models import KeepAlive

# llama.cpp's load-time and hardware hints: MLX decides these itself, so they have no effect
NO_EFFECT_OPTIONS = ("numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only",
                     "use_mmap", "use_mlock", "embedding_only", "num_thread", "num_keep", "penalize_newline")
# samplers mlxctl does not have: only the value that turns each off is accepted
NEUTRAL_OPTIONS = {"typical_p": 1.0, "tfs_z": 1.0, "mirostat": 0}


class _Body(NullMeansAbsent):
    model_config = ConfigDict(extra="forbid")


class OllamaOptions(_Body):
    """``options``: the mapped sampling options, then the accepted ones with no effect."""

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)  # 0: off
    min_p: float | None = Field(None, ge=0, le=1)
    seed: int | None = None
    num_predict: int | None = Field(None, ge=-2)  # -1: no limit, -2: until the context is full
    stop: str | list[str] | None = None
    repeat_penalty: float | None = Field(None, gt=0, le=2)
    repeat_last_n: int | None = Field(None, ge=-1)  # only -1 (the whole context) with a repeat_penalty
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    num_ctx: int | None = Field(None, ge=1)  # at most the model's context; caps prompt + output
    num_draft_tokens: int | None = Field(None, ge=0, le=64)  # serve --speculative: this request's drafts (0: none)
    typical_p: float | None = None
    tfs_z: float | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None  # only read by mirostat, which is off
    mirostat_eta: float | None = None
    numa: Any = None
    num_batch: Any = None
    num_gpu: Any = None
    main_gpu: Any = None
    low_vram: Any = None
    f16_kv: Any = None
    logits_all: Any = None
    vocab_only: Any = None
    use_mmap: Any = None
    use_mlock: Any = None
    embedding_only: Any = None
    num_thread: Any = None
    num_keep: Any = None
    penalize_newline: Any = None

    @field_validator("typical_p", "tfs_z", "mirostat")
    @classmethod
    def _neutral_only(cls, value: Any, info: Any) -> Any:
        neutral = NEUTRAL_OPTIONS[info.field_name]
        if value is not None and value != neutral:
            raise ValueError(f"mlxctl has no {info.field_name} sampler: only {neutral} (off) is accepted")
        return value

    @field_validator("num_predict")
    @classmethod
    def _not_zero(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("must be at least 1, or -1 (no limit) or -2 (until the context is full)")
        return value


class OllamaCalledFunction(_Body):
    name: StrictStr
    arguments: dict[str, Any] = Field(default_factory=dict)  # an object, as Ollama sends it
    index: int | None = None


class OllamaToolCall(_Body):
    function: OllamaCalledFunction
    id: str | None = None
    type: Literal["function"] | None = None


class OllamaMessage(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[StrictStr] | None = None  # base64, each an image of a vision model
    thinking: str | None = None  # an earlier assistant turn's thinking
    tool_calls: list[OllamaToolCall] | None = None  # assistant only
    tool_name: str | None = None  # tool only: the tool whose result this is

    @field_validator("tool_calls")
    @classmethod
    def _assistant_calls(cls, value: list[OllamaToolCall] | None, info: Any) -> list[OllamaToolCall] | None:
        if value and info.data.get("role") != "assistant":
            raise ValueError("tool_calls are only allowed on assistant messages")
        return value


Format = Literal["", "json"] | dict[str, Any] | None  # "json" or a JSON schema
Think = StrictBool | Literal["low", "medium", "high"] | None


class _Generating(_Body):
    model: str = Field(min_length=1)
    format: Format = None
    options: OllamaOptions | None = None
    stream: bool = True  # Ollama's default
    keep_alive: KeepAlive = None
    think: Think = None


class OllamaChatRequest(_Generating):
    messages: list[OllamaMessage] = Field(default_factory=list)  # empty: only load the model
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None  # mlxctl extension, OpenAI's: "required" or {"type": "function", ...} forces a call


class OllamaGenerateRequest(_Generating):
    prompt: str = ""  # empty: only load the model
    suffix: str = ""
    system: str = ""
    template: str = ""
    context: list[StrictInt] | None = None  # token ids of an earlier exchange, prepended
    raw: bool = False
    images: list[StrictStr] | None = None

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str) -> str:
        if value:
            raise ValueError("suffix (fill-in-the-middle) is not supported by mlxctl yet")
        return value


class OllamaEmbedRequest(_Body):
    model: str = Field(min_length=1)
    input: str | list[str]
    truncate: bool = True  # Ollama's default: inputs over the model's limit are cut
    dimensions: int | None = Field(None, ge=1)
    options: OllamaOptions | None = None  # no sampling in embeddings: accepted, no effect
    keep_alive: KeepAlive = None


class OllamaEmbeddingsRequest(_Body):
    """The older /api/embeddings: one ``prompt``, one ``embedding``."""

    model: str = Field(min_length=1)
    prompt: str
    options: OllamaOptions | None = None
    keep_alive: KeepAlive = None


class OllamaShowRequest(_Body):
    model: str = ""
    name: str = ""  # the older spelling of model
    verbose: bool = False

    @property
    def model_name(self) -> str:
        return self.model or self.name


class OllamaPullRequest(_Body):
    model: str = ""
    name: str = ""  # the older spelling of model
    insecure: bool = False  # no registry here: nothing to be insecure about
    stream: bool = True

    @property
    def model_name(self) -> str:
        return self.model or self.name
