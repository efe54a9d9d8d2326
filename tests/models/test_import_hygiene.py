"""Light model-layer modules import no MLX, UI or HTTP stack (``mlxctl --help`` stays fast)."""

import subprocess
import sys

import pytest

LIGHT_MODULES = [
    "mlxctl.models.resolve",
    "mlxctl.models.loader",
    "mlxctl.models.store",
    "mlxctl.models.catalog",
    "mlxctl.models.pypi",
    "mlxctl.models.hub",
]
HEAVY = [
    "mlx",
    "mlx_lm",
    "transformers",
    "tokenizers",
    "huggingface_hub",
    "numpy",
    "typer",
    "rich",
    "aiohttp",
]
NEVER = ["typer", "rich", "aiohttp", "textual"]
ALL_MODULES = LIGHT_MODULES + [
    "mlxctl.models.gguf",
    "mlxctl.models.gguf_tokenizer",
    "mlxctl.models.dequantize",
    "mlxctl.models.manifest",
]


def _imported_after(module: str, candidates: list[str]) -> list[str]:
    code = f"import sys, {module}\nprint(' '.join(m for m in {candidates!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_light_modules_import_nothing_heavy(module):
    assert _imported_after(module, HEAVY) == []


@pytest.mark.parametrize("module", ALL_MODULES)
def test_no_ui_or_http_imports(module):
    assert _imported_after(module, NEVER) == []
