"""A real `init_app` server on loopback over the real SmolLM2 engine (shared per session)."""

from __future__ import annotations

import dataclasses

import pytest

from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings


@pytest.fixture(scope="session")
def engine(smollm2_engine):
    return smollm2_engine


@pytest.fixture
def serve(engine):
    """serve(**settings) -> base URL of a fresh app with those settings; stopped after the test."""
    servers = []

    def start(**overrides) -> str:
        settings = dataclasses.replace(ServeSettings(model_name="smollm2-135m"), **overrides)
        server = BackgroundServer(init_app(engine, settings)).start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def base_url(serve) -> str:
    return serve()


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A tiny llama-shaped MLX folder (imported from a GGUF the tests write): a second model."""
    from mlxctl.models.gguf import import_gguf
    from tests.models.helpers import write_tiny_gguf

    root = tmp_path_factory.mktemp("tiny-model")
    path, _, _ = write_tiny_gguf(root / "tiny.gguf")
    return import_gguf(path, root / "tiny")
