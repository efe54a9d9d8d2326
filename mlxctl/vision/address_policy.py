"""Which network addresses a remote media fetch may connect to: public internet addresses only.

A server that fetches the URLs its clients send must not become a probe of its own network:
loopback, private ranges, link-local (cloud metadata services answer on 169.254.169.254),
multicast, reserved and unspecified addresses are refused. An IPv6 address that carries an IPv4
one (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, 6to4 ``2002::/16``, NAT64
``64:ff9b::/96``) is judged by that IPv4 address. :func:`address_refusal` is pure: the
fetch (vision/remote_fetch.py) asks it about every address a host name resolves to, on the
first request and on every redirect.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_CATEGORIES = (  # checked in this order: the first that applies names the refusal
    ("is_unspecified", "an unspecified address"),
    ("is_loopback", "a loopback address"),
    ("is_link_local", "a link-local address"),
    ("is_multicast", "a multicast address"),
    ("is_reserved", "a reserved address"),
    ("is_private", "a private address"),
    ("is_site_local", "a site-local address"),
)


def address_refusal(address: str | IPAddress, allowed: Sequence[str] = ()) -> str | None:
    """Why a fetch may not connect to ``address`` ("a loopback address", ...), or None when it
    may: a globally routable address, or one inside a network of ``allowed`` (CIDR strings, for
    tests; no user setting fills it). A string that is not an IP address is refused too."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
    except ValueError:
        return "not an IP address"
    if any(ip in ipaddress.ip_network(net, strict=False) for net in allowed):
        return None
    embedded = _embedded_ipv4(ip)
    if embedded is not None:  # it stands for an IPv4 address: that one decides
        return address_refusal(embedded, allowed)
    for attribute, reason in _CATEGORIES:
        if getattr(ip, attribute, False):
            return reason
    return None if ip.is_global else "not a globally routable address"


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for or routes to, if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
