"""Remote (http(s)) media on a real mlxctl server of the LLaVA-layout test model: refused with a
400 naming the field and `--allow-remote-media` without that flag, on every API that takes a
URL; with it, fetched from public addresses only (a loopback host is refused before anything is
sent to it), the flag set as users set it (`mlxctl serve --allow-remote-media`)."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest
from aiohttp import web

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.server.infra import wait_until
from tests.vision.conftest import MODEL, png_bytes
from tests.vision.media_host import background_media_host

REMOTE = "https://images.example/cat.png"  # never fetched: no test reaches the internet


def chat_part(kind: str, url: str) -> dict:
    body = {"type": kind, kind: {"url": url}}
    return {"messages": [{"role": "user", "content": [body, {"type": "text", "text": "Hi"}]}], "max_tokens": 2}


REQUESTS = {  # API: (path, body with the URL, the field that names it)
    "chat image_url": ("/v1/chat/completions", chat_part("image_url", REMOTE), "messages.0.content.0.image_url.url"),
    "chat video_url": ("/v1/chat/completions", chat_part("video_url", REMOTE), "messages.0.content.0.video_url.url"),
    "responses input_image": ("/v1/responses", {"max_output_tokens": 2, "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": REMOTE}, {"type": "input_text", "text": "Hi"}]}]},
        "input.0.content.0.image_url"),
    "anthropic url image": ("/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": REMOTE}}, {"type": "text", "text": "Hi"}]}]},
        "messages.0.content.0.source"),
}


@pytest.mark.parametrize("api", REQUESTS)
def test_remote_urls_are_refused_without_the_flag(serve, api):
    path, body, field = REQUESTS[api]
    resp = httpx.post(serve() + path, json={"model": MODEL, **body}, timeout=60)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert "URLs are not fetched by this server" in error["message"] and "--allow-remote-media" in error["message"]
    assert field in error["message"]
    if api != "anthropic url image":  # Anthropic's error body has no param
        assert error["param"] == field


def test_with_the_flag_a_loopback_host_is_still_refused(serve):
    with background_media_host({"/cat.png": web.Response(body=png_bytes(50), content_type="image/png")}) as host:
        resp = httpx.post(serve(allow_remote_media=True) + "/v1/chat/completions", timeout=60,
                          json={"model": MODEL, **chat_part("image_url", host.url("/cat.png"))})
        assert host.seen == []
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["param"] == "messages.0.content.0.image_url.url"
    assert "its host is a loopback address" in error["message"] and "public internet addresses" in error["message"]


@pytest.fixture
def served_remote(llava_dir):
    """The base URL of `mlxctl serve --allow-remote-media` on the test model (a subprocess)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mlxctl", "serve", "-m", str(llava_dir), "--port", str(port),
                             "--served-model-name", MODEL, "--allow-remote-media"],
                            cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)
    try:
        url = next((m.group(1) for line in proc.stderr if (m := re.search(r"listening on (http://\S+)", line))), None)
        assert url, f"serve exited ({proc.wait()}) without printing its URL"
        assert wait_until(lambda: httpx.get(url + "/health", timeout=5).status_code == 200, timeout=120,
                          interval=0.25)
        yield url
    finally:
        proc.kill()
        proc.wait(10)


def test_the_serve_flag_turns_remote_fetching_on(served_remote):
    with background_media_host({"/clip.mp4": "http://169.254.169.254/latest/meta-data/"}) as host:
        resp = httpx.post(served_remote + "/v1/chat/completions", timeout=60,
                          json={"model": MODEL, **chat_part("video_url", host.url("/clip.mp4"))})
        assert host.seen == []
    assert resp.status_code == 400
    error = resp.json()["error"]  # fetching was tried (the flag is on) and the address refused
    assert error["param"] == "messages.0.content.0.video_url.url"
    assert "could not fetch the video: its host is a loopback address" in error["message"]
