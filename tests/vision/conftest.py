"""The LLaVA-layout test model (SmolLM2 text tower, tiny random vision tower) and an engine on it."""

from __future__ import annotations

import base64
import dataclasses
import io

import pytest

from tests.vision.build_model import build_llava

MODEL = "llava-test"  # the name the test servers serve the model under


def png_bytes(seed: int = 0, size: tuple[int, int] = (80, 60), fmt: str = "PNG", mode: str = "RGB") -> bytes:
    """A random image (seeded), encoded."""
    import numpy as np
    from PIL import Image

    channels = len(mode)
    arr = (np.random.RandomState(seed).rand(size[1], size[0], channels) * 255).astype("uint8")
    buf = io.BytesIO()
    Image.fromarray(arr if channels > 1 else arr[..., 0], mode).save(buf, fmt)
    return buf.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


@pytest.fixture(scope="session")
def llava_dir(smollm2, tmp_path_factory):
    """The test model's folder (built once per session under tmp)."""
    return build_llava(smollm2.path, tmp_path_factory.mktemp("models") / "llava-smollm2-test")


@pytest.fixture(scope="session")
def llava_loaded(llava_dir):
    from mlxctl.models.loader import load_model

    return load_model(llava_dir)


def engine_on(loaded):
    """An engine on a loaded test model, as a generator for fixtures (prefix blocks of 16
    tokens, so short prompts cache)."""
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig

    engine = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=16))).start()
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def vision_engine(llava_loaded):
    """One engine on the LLaVA test model, shared."""
    yield from engine_on(llava_loaded)


@pytest.fixture
def serve(vision_engine):
    """serve(engine=..., **settings) -> base URL of a fresh app; stopped after the test."""
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    servers = []

    def start(engine=vision_engine, name=MODEL, **overrides) -> str:
        settings = dataclasses.replace(ServeSettings(model_name=name), **overrides)
        server = BackgroundServer(init_app(engine, settings)).start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def client(serve):
    """The official openai client on a fresh server of the test model."""
    import openai

    return openai.OpenAI(base_url=serve() + "/v1", api_key="x", max_retries=0)
