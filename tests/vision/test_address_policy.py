"""The address rule of remote media fetches: public internet addresses only (a pure function)."""

from __future__ import annotations

import pytest

from mlxctl.vision.address_policy import address_refusal


@pytest.mark.parametrize("address, reason", [
    # public: fetched
    ("93.184.216.34", None),
    ("8.8.8.8", None),
    ("2606:2800:220:1:248:1893:25c8:1946", None),
    ("2001:4860:4860::8888", None),
    ("::ffff:8.8.8.8", None),  # IPv4-mapped public
    ("64:ff9b::808:808", None),  # NAT64 of a public address
    # loopback
    ("127.0.0.1", "a loopback address"),
    ("127.1.2.3", "a loopback address"),
    ("::1", "a loopback address"),
    ("::ffff:127.0.0.1", "a loopback address"),  # IPv4-mapped
    ("::127.0.0.1", "a loopback address"),  # IPv4-compatible
    ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
    ("64:ff9b::7f00:1", "a loopback address"),  # NAT64 of 127.0.0.1
    # link-local, the cloud metadata address among them
    ("169.254.169.254", "a link-local address"),
    ("::ffff:169.254.169.254", "a link-local address"),
    ("::ffff:a9fe:a9fe", "a link-local address"),  # the same, written in hex
    ("fe80::1", "a link-local address"),
    ("fe80::1%eth0", "a link-local address"),  # with a zone, as getaddrinfo gives it
    # private
    ("10.0.0.1", "a private address"),
    ("172.16.5.4", "a private address"),
    ("192.168.1.1", "a private address"),
    ("::ffff:10.0.0.1", "a private address"),
    ("fd00:ec2::254", "a private address"),  # unique-local (AWS's IPv6 metadata address)
    ("fc00::1", "a private address"),
    ("2001:db8::1", "a private address"),  # documentation
    # not globally routable for other reasons
    ("100.64.0.1", "not a globally routable address"),  # carrier-grade NAT
    ("0.0.0.0", "an unspecified address"),
    ("::", "an unspecified address"),
    ("224.0.0.1", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("240.0.0.1", "a reserved address"),
    ("255.255.255.255", "a reserved address"),  # broadcast
    ("fec0::1", "a site-local address"),
    ("example.com", "not an IP address"),
])
def test_address_rule(address, reason):
    assert address_refusal(address) == reason


def test_allowed_networks_let_exactly_those_through():
    loopback = ("127.0.0.0/8",)
    assert address_refusal("127.0.0.1", loopback) is None
    assert address_refusal("127.9.9.9", loopback) is None
    assert address_refusal("169.254.169.254", loopback) == "a link-local address"
    assert address_refusal("10.0.0.1", loopback) == "a private address"
    assert address_refusal("::1", loopback) == "a loopback address"  # another network
