"""Fetching an ``http(s)://`` image or video for a request, without letting the request probe
the server's own network (``serve --allow-remote-media``; see docs/vision.md).

Every hop is checked before anything is sent: the host name is resolved once, every address it
resolves to must pass :func:`~mlxctl.vision.address_policy.address_refusal` (public internet
addresses only), and the connection goes to the address that was checked (the URL's host is
swapped for it; ``Host`` and, for https, the TLS server name and certificate check keep the
name), so a DNS answer that changes between the check and the connection (rebinding) cannot
redirect it. Redirects are followed here, at most ``max_redirects`` of them, each Location
checked the same way. Proxy settings from the environment are not used (a proxy would resolve
the name itself). The whole fetch has one time limit and the body a byte limit.

Errors say what went wrong in our terms (an address that is not allowed, too large, too slow,
no connection, no answer with the media) and never repeat the other server's status or body.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlxctl.vision.address_policy import address_refusal
from mlxctl.vision.images import ImageError

if TYPE_CHECKING:
    import httpx

    from mlxctl.vision.sources import MediaKind, MediaPolicy

REDIRECTS = frozenset({301, 302, 303, 307, 308})
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (the system resolver; an IP literal is itself)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


@dataclass(frozen=True)
class _Hop:
    """One request of a fetch: the URL as named, and the checked address it connects to."""

    url: httpx.URL
    address: str


async def fetch_remote(url: str, where: str, policy: MediaPolicy, kind: MediaKind, *,
                       resolve: Resolver = system_resolve, verify: ssl.SSLContext | bool = True) -> bytes:
    """The bytes at ``url``, fetched as the module says; an ImageError naming ``where`` otherwise.
    ``resolve`` and ``verify`` are for tests (a fixed resolver, a test CA)."""
    import httpx

    noun = kind.noun
    try:
        first = httpx.URL(url)
    except httpx.InvalidURL:
        raise ImageError(where, f"the {noun} URL is not a valid URL") from None
    try:
        async with asyncio.timeout(policy.timeout_s):
            async with httpx.AsyncClient(follow_redirects=False, trust_env=False, verify=verify,
                                         timeout=policy.timeout_s) as client:
                return await _follow(client, first, where, policy, kind, resolve)
    except (TimeoutError, httpx.TimeoutException):  # the whole fetch's limit, or one read's
        raise ImageError(where, f"fetching the {noun} took longer than {policy.timeout_s:g} s") from None
    except httpx.ConnectError:
        raise ImageError(where, f"could not fetch the {noun}: no connection to its host could be made "
                                "(or its TLS certificate is not valid for it)") from None
    except (httpx.HTTPError, ssl.SSLError, OSError):
        raise ImageError(where, f"could not fetch the {noun}: the connection to its host failed") from None


async def _follow(client: httpx.AsyncClient, url: httpx.URL, where: str, policy: MediaPolicy, kind: MediaKind,
                  resolve: Resolver) -> bytes:
    """GET ``url``, following at most ``policy.max_redirects`` redirects, each hop checked."""
    for _ in range(policy.max_redirects + 1):
        hop = await _checked_hop(url, where, policy, kind, resolve)
        async with _send(client, hop, kind) as resp:
            if resp.status_code not in REDIRECTS:
                return await _body(resp, where, kind)
            url = _next_url(url, resp, where, kind)
    raise ImageError(where, f"could not fetch the {kind.noun}: it was redirected more than "
                            f"{policy.max_redirects} times")


async def _checked_hop(url: httpx.URL, where: str, policy: MediaPolicy, kind: MediaKind, resolve: Resolver) -> _Hop:
    """``url``'s host resolved once, every address of it allowed; the first is the one used."""
    if url.scheme not in ("http", "https") or not url.host:
        raise ImageError(where, f"could not fetch the {kind.noun}: it was redirected to a URL that is not http(s)")
    host = url.raw_host.decode("ascii")
    try:
        addresses = await resolve(host, url.port or (443 if url.scheme == "https" else 80))
    except (socket.gaierror, UnicodeError):
        raise ImageError(where, f"could not fetch the {kind.noun}: its host name did not resolve") from None
    if not addresses:
        raise ImageError(where, f"could not fetch the {kind.noun}: its host name did not resolve")
    for address in addresses:
        reason = address_refusal(address, policy.allowed_networks)
        if reason is not None:
            raise ImageError(where, f"could not fetch the {kind.noun}: its host is {reason}, and this server "
                                    "only fetches media from public internet addresses")
    return _Hop(url, addresses[0])


def _send(client: httpx.AsyncClient, hop: _Hop, kind: MediaKind) -> Any:
    """The streamed GET of ``hop``, connected to its checked address (an async context manager)."""
    headers = {"Host": hop.url.netloc.decode("ascii"), "Accept": f"{kind.noun}/*"}
    extensions = {"sni_hostname": hop.url.raw_host.decode("ascii")} if hop.url.scheme == "https" else {}
    pinned = hop.url.copy_with(host=hop.address.split("%", 1)[0])
    return client.stream("GET", pinned, headers=headers, extensions=extensions)


def _next_url(url: httpx.URL, resp: httpx.Response, where: str, kind: MediaKind) -> httpx.URL:
    """Where a redirect points, relative to the URL as named (not to the address it went to)."""
    import httpx

    location = resp.headers.get("location")
    if not location:
        raise ImageError(where, f"could not fetch the {kind.noun}: its host redirected without a location")
    try:
        return url.join(location)
    except httpx.InvalidURL:
        raise ImageError(where, f"could not fetch the {kind.noun}: its host redirected to an invalid URL") from None


async def _body(resp: httpx.Response, where: str, kind: MediaKind) -> bytes:
    """The body of a final answer, at most ``kind.max_bytes`` of it."""
    limit, noun = kind.max_bytes, kind.noun
    if resp.status_code != 200:
        raise ImageError(where, f"could not fetch the {noun}: its host did not answer with it")
    declared = resp.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ImageError(where, f"the {noun} is {declared} bytes, more than the {limit} allowed")
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ImageError(where, f"the {noun} is more than the {limit} bytes allowed")
        chunks.append(chunk)
    return b"".join(chunks)
