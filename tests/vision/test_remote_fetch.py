"""Remote image fetches against a real aiohttp host on 127.0.0.1: loopback refused by default,
every redirect hop checked (the metadata address, private ranges), the connection pinned to the
checked address (plain and TLS), size and time limits, and errors that repeat nothing the other
server said."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from aiohttp import web

from mlxctl.engine.kv.media import image_key
from mlxctl.vision.fetch import ImageRef, MediaPolicy, load_image
from mlxctl.vision.images import ImageError
from mlxctl.vision.remote_fetch import fetch_remote
from mlxctl.vision.sources import MediaKind
from tests.vision.conftest import png_bytes
from tests.vision.media_host import make_ca, media_host

WHERE = "messages.0.content.0.image_url.url"
REMOTE = MediaPolicy(allow_http=True)  # what `serve --allow-remote-media` gives
LOOPBACK_OK = dataclasses.replace(REMOTE, allowed_networks=("127.0.0.0/8",))  # tests only: no flag does this
IMAGE = MediaKind("image", 10_000)


def small_png(seed: int) -> bytes:
    return png_bytes(seed, (20, 20))


def png_response(seed: int = 1) -> web.Response:
    return web.Response(body=small_png(seed), content_type="image/png")


def fetch(routes: dict, path: str, policy: MediaPolicy = LOOPBACK_OK, name: str = "127.0.0.1", **kw):
    """(the bytes or the ImageError, the requests the host saw) for a fetch of ``path`` from the
    host named ``name``."""
    async def go():
        async with media_host(routes) as host:
            try:
                got = await fetch_remote(host.url(path, name), WHERE, policy, IMAGE, **kw)
            except ImageError as err:
                got = err
            return got, host.seen
    return asyncio.run(go())


def refused(result, match: str) -> list:
    got, seen = result
    assert isinstance(got, ImageError), got
    assert got.param == WHERE and match in got.message, got.message
    return seen


def test_loopback_is_refused_by_default_and_nothing_is_sent():
    seen = refused(fetch({"/cat.png": png_response()}, "/cat.png", REMOTE), "its host is a loopback address")
    assert seen == []


def test_an_allowed_host_is_fetched_and_decoded():
    async def go():
        async with media_host({"/cat.png": png_response(3)}) as host:
            return await load_image(ImageRef(WHERE, url=host.url("/cat.png")), LOOPBACK_OK)
    assert asyncio.run(go()).key == image_key(small_png(3))


@pytest.mark.parametrize("target, reason", [
    ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
    ("http://[::ffff:169.254.169.254]/latest/meta-data/", "a link-local address"),
    ("http://10.0.0.1/admin", "a private address"),
    ("http://192.168.1.1/", "a private address"),
    ("http://[::1]/", "a loopback address"),
    ("http://0.0.0.0/", "an unspecified address"),
])
def test_a_redirect_to_a_refused_address_stops_at_that_hop(target, reason):
    routes = {"/cat.png": "/hop", "/hop": target}
    seen = refused(fetch(routes, "/cat.png"), f"its host is {reason}")
    assert [path for path, _ in seen] == ["/cat.png", "/hop"]


def test_redirects_are_followed_up_to_the_limit():
    routes = {"/a": "/b", "/b": "/c", "/c": "/d", "/d": png_response(4)}
    got, seen = fetch(routes, "/a")
    assert got == small_png(4) and len(seen) == 4  # three redirects: the limit
    seen = refused(fetch({**routes, "/d": "/e", "/e": png_response(4)}, "/a"), "redirected more than 3 times")
    assert len(seen) == 4
    refused(fetch({"/a": "ftp://example.com/cat.png"}, "/a"), "redirected to a URL that is not http(s)")


def test_the_other_servers_answer_is_not_repeated():
    secret = web.Response(status=403, text="denied by internal-proxy.corp 10.1.2.3")
    got, _ = fetch({"/cat.png": secret}, "/cat.png")
    assert isinstance(got, ImageError)
    assert got.message == f"{WHERE}: could not fetch the image: its host did not answer with it"
    got, _ = fetch({}, "/missing.png")
    assert "404" not in got.message and "no such media" not in got.message


def test_size_limits():
    big = png_bytes(5, (400, 400))
    assert len(big) > IMAGE.max_bytes
    refused(fetch({"/big.png": web.Response(body=big)}, "/big.png"), f"is {len(big)} bytes, more than the 10000")

    async def chunked(request: web.Request) -> web.StreamResponse:  # no Content-Length: counted as it comes
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(4):
            await resp.write(big[:4000])
        return resp

    async def go():
        app = web.Application()
        app.router.add_get("/big.png", chunked)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            await fetch_remote(f"http://127.0.0.1:{runner.addresses[0][1]}/big.png", WHERE, LOOPBACK_OK, IMAGE)
        finally:
            await runner.cleanup()
    with pytest.raises(ImageError, match="more than the 10000 bytes allowed"):
        asyncio.run(go())


def test_a_host_that_never_answers_times_out():
    never = asyncio.Event()

    async def stall(request: web.Request) -> web.Response:
        await never.wait()
        return png_response()

    async def go():
        app = web.Application()
        app.router.add_get("/slow.png", stall)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            await fetch_remote(f"http://127.0.0.1:{runner.addresses[0][1]}/slow.png", WHERE,
                               dataclasses.replace(LOOPBACK_OK, timeout_s=0.2), IMAGE)
        finally:
            never.set()
            await runner.cleanup()
    with pytest.raises(ImageError, match="took longer than 0.2 s"):
        asyncio.run(go())


class Resolver:
    """A fixed DNS: name -> addresses, counting the lookups."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers, self.lookups = answers, []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return self.answers[host]


def test_the_connection_goes_to_the_checked_address_with_the_name_kept():
    # images.example exists only in this resolver: the fetch can only work by connecting to the
    # address the check saw, with the name as the Host header; one lookup per hop
    resolve = Resolver({"images.example": ["127.0.0.1"]})
    routes = {"/a.png": "/b.png", "/b.png": png_response(6)}

    async def go():
        async with media_host(routes) as host:
            data = await fetch_remote(host.url("/a.png", "images.example"), WHERE, LOOPBACK_OK, IMAGE,
                                      resolve=resolve)
            return data, host
    data, host = asyncio.run(go())
    assert data == small_png(6)
    assert host.seen == [("/a.png", f"images.example:{host.port}"), ("/b.png", f"images.example:{host.port}")]
    assert resolve.lookups == ["images.example", "images.example"]


def test_a_name_with_any_refused_address_is_refused():
    resolve = Resolver({"mixed.example": ["127.0.0.1", "10.0.0.7"]})
    seen = refused(fetch({"/a.png": png_response()}, "/a.png", name="mixed.example", resolve=resolve),
                   "its host is a private address")
    assert seen == []
    got, _ = fetch({}, "/a.png", resolve=Resolver({"127.0.0.1": []}))
    assert "did not resolve" in got.message


def test_tls_is_checked_against_the_name_not_the_address(tmp_path):
    ca = make_ca(tmp_path, "images.example")
    resolve = Resolver({"images.example": ["127.0.0.1"], "other.example": ["127.0.0.1"]})

    async def go(name: str):
        async with media_host({"/cat.png": png_response(7)}, tls=ca.server) as host:
            try:
                return await fetch_remote(host.url("/cat.png", name, "https"), WHERE, LOOPBACK_OK, IMAGE,
                                          resolve=resolve, verify=ca.client)
            except ImageError as err:
                return err
    assert asyncio.run(go("images.example")) == small_png(7)
    wrong = asyncio.run(go("other.example"))  # same address, a name the certificate is not for
    assert isinstance(wrong, ImageError) and "TLS certificate is not valid" in wrong.message
