"""A real aiohttp web server on 127.0.0.1 that stands in for a remote media host (the tests reach
no internet), optionally over TLS with a certificate from a throwaway test CA."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web


@dataclass
class MediaHost:
    """The running host: its port and the requests it got (path, Host header), in order."""

    port: int = 0
    seen: list[tuple[str, str]] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"


def media_app(routes: dict[str, web.Response | str], host: MediaHost) -> web.Application:
    """Serve ``routes`` (path -> a response, or a Location to redirect to with 302); unknown
    paths are 404s; every request is noted in ``host.seen``."""
    async def handle(request: web.Request) -> web.StreamResponse:
        host.seen.append((request.path, request.headers.get("Host", "")))
        answer = routes.get(request.path)
        if isinstance(answer, str):
            return web.Response(status=302, headers={"Location": answer})
        return answer if answer is not None else web.Response(status=404, text="no such media")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


@contextlib.asynccontextmanager
async def media_host(routes: dict[str, web.Response | str],
                     tls: ssl.SSLContext | None = None) -> AsyncIterator[MediaHost]:
    """A host serving ``routes`` on the running loop."""
    host = MediaHost()
    runner = web.AppRunner(media_app(routes, host))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls).start()
    host.port = runner.addresses[0][1]
    try:
        yield host
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def background_media_host(routes: dict[str, web.Response | str]) -> Iterator[MediaHost]:
    """A host serving ``routes`` from its own thread and loop (for tests that are not async)."""
    loop, ready, stop = asyncio.new_event_loop(), threading.Event(), asyncio.Event()
    box: list[MediaHost] = []

    async def serve() -> None:
        async with media_host(routes) as host:
            box.append(host)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="media-host", daemon=True)
    thread.start()
    ready.wait(30)
    try:
        yield box[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()


@dataclass(frozen=True)
class CertAuthority:
    """A CA the client trusts (``client``) and a server context whose certificate it signed."""

    client: ssl.SSLContext
    server: ssl.SSLContext


def make_ca(tmp_path: Path, server_name: str) -> CertAuthority:
    """A fresh CA and a certificate for ``server_name`` signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject: str, key, issuer: str, issuer_key, ca: bool, san: list | None = None):
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = cert("mlxctl test CA", ca_key, "mlxctl test CA", ca_key, True)
    leaf = cert(server_name, leaf_key, "mlxctl test CA", ca_key, False,
                [x509.DNSName(server_name)])
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    return CertAuthority(ssl.create_default_context(cafile=str(tmp_path / "ca.pem")), server)
