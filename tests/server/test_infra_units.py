"""The infrastructure's small parts without a model: token bucket, log lines, loading state."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest

from mlxctl.engine.engine import Engine
from mlxctl.server.app import init_app
from mlxctl.server.auth import key_matches
from mlxctl.server.logs import JsonFormatter, configure
from mlxctl.server.ratelimit import TokenBucket, bucket_for, forget_idle
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings


def test_token_bucket_refills_over_time():
    bucket = TokenBucket(capacity=2, per_second=1.0, stamp=0.0)
    assert bucket.take(0.0) == 0 and bucket.take(0.0) == 0
    assert bucket.take(0.0) == pytest.approx(1.0)
    assert bucket.take(0.5) == pytest.approx(0.5)
    assert bucket.take(1.0) == 0


def test_idle_clients_are_forgotten():
    buckets: dict = {}
    bucket_for(buckets, "a", 60).take()
    bucket_for(buckets, "b", 60)
    forget_idle(buckets)
    assert list(buckets) == ["a"]


def test_key_comparison():
    assert key_matches("k", "k") and not key_matches("K", "k") and not key_matches(None, "k")
    assert not key_matches("é", "k")


def test_json_log_lines():
    record = logging.LogRecord("mlxctl.access", logging.INFO, __file__, 1, "GET /x 200", None, None)
    record.http = {"method": "GET", "path": "/x", "status": 200}
    line = json.loads(JsonFormatter().format(record))
    assert line["path"] == "/x" and line["status"] == 200 and line["level"] == "info"


def test_configure_sends_access_lines_to_the_stream():
    stream = io.StringIO()
    handler = configure("json", stream)
    try:
        logging.getLogger("mlxctl.access").info("hello", extra={"http": {"status": 201}})
    finally:
        for name in ("mlxctl.access", "mlxctl.server"):
            logging.getLogger(name).removeHandler(handler)
    assert json.loads(stream.getvalue())["status"] == 201


@pytest.fixture
def loading_url():
    """A server whose engine has not loaded its model (never started)."""
    server = BackgroundServer(init_app(Engine(lambda: None), ServeSettings(model_name="m"))).start()
    yield server.url
    server.stop()


def test_while_loading_health_is_503_and_model_endpoints_wait(loading_url):
    assert httpx.get(f"{loading_url}/health").status_code == 503
    r = httpx.post(f"{loading_url}/v1/chat/completions", json={"model": "m", "messages": []})
    assert r.status_code == 503 and r.headers["Retry-After"]
    assert httpx.post(f"{loading_url}/tokenize", json={"prompt": "x"}).status_code == 503
    status = httpx.get(f"{loading_url}/v1/status").json()
    assert status["loaded"] is False and status["engine"]["running"] == []
    assert httpx.get(f"{loading_url}/metrics").status_code == 200


def test_api_key_sources(tmp_path):
    from mlxctl.cli.serve import read_api_key
    from mlxctl.errors import BadInputError

    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    assert read_api_key("from-env", None) == "from-env"
    assert read_api_key("from-env", key_file) == "from-file"  # the file beats MLXCTL_API_KEY
    assert read_api_key(None, None) is None
    with pytest.raises(BadInputError):
        read_api_key("flag", key_file, key_from_flag=True)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(BadInputError):
        read_api_key(None, tmp_path / "empty")
