"""GET / and HEAD /: liveness probes (Ollama-compatible clients ask them) get a 200."""

from __future__ import annotations

import httpx

from mlxctl import __version__
from mlxctl.engine.engine import Engine
from tests.server.infra import served


def test_get_names_the_server_and_head_is_empty(base_url):
    got = httpx.get(f"{base_url}/")
    assert got.status_code == 200 and got.text.startswith(f"mlxctl serve {__version__}")
    head = httpx.head(f"{base_url}/")
    assert head.status_code == 200 and head.content == b""


def test_open_without_the_key_and_while_loading():
    with served(Engine(lambda: None), api_key="k") as url:  # an engine never started: still loading
        assert httpx.head(f"{url}/").status_code == 200
        assert httpx.get(f"{url}/").status_code == 200
        assert httpx.get(f"{url}/v1/models").status_code == 401  # the rest still needs the key
