"""project/net/: which addresses are public, the allow-list, and one resolution through the configured servers."""

from __future__ import annotations

import pytest

from project.errors import TrawlError
from project.net import (
    address_allowed,
    address_is_public,
    embedded_ipv4,
    host_addresses,
    parse_address,
    parse_networks,
    resolve_checked,
    target_check,
)
from project.net.dns_servers import parse_servers
from tests.security.nameserver import NameServer

# Teredo: server 93.184.216.34, client 127.0.0.1 stored obfuscated (every bit flipped: 80ff:fffe).
TEREDO_TO_LOOPBACK = "2001:0:5db8:d822::80ff:fffe"
TEREDO_TO_PUBLIC = "2001:0:5db8:d822::a247:27dd"  # client 93.184.216.34


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
        "64:ff9b::a00:5",  # NAT64 of 10.0.0.5
        "64:ff9b:1::5db8:d822",  # local-use NAT64 (RFC 8215): an operator's own translator, whatever it carries
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::",  # 6to4 of 192.168.1.1
        TEREDO_TO_LOOPBACK,
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "::127.0.0.1",  # IPv4-compatible (deprecated)
        "::a00:1",
        "::",
        "::1",
        "0.0.0.0",
        "ff02::1",  # multicast
        "239.1.2.3",
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "fec0::1",  # site-local (deprecated, still not public)
        "2001:db8::1",  # documentation
        "100.64.0.1",
        "fe80::1%eth0",
    ],
)
def test_private_forms_are_not_public(address):
    assert address_is_public(address) is False
    assert address_allowed(address) is False


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "2606:4700:4700::1111", "64:ff9b::5db8:d822", "2002:5db8:d822::1", TEREDO_TO_PUBLIC],
)
def test_public_addresses_and_translations_of_public_ipv4_are_public(address):
    assert address_is_public(address) is True


def test_embedded_ipv4_reads_every_translation():
    assert [str(v4) for v4 in embedded_ipv4(parse_address("64:ff9b::7f00:1"))] == ["127.0.0.1"]
    assert [str(v4) for v4 in embedded_ipv4(parse_address("2002:7f00:1::1"))] == ["127.0.0.1"]
    assert [str(v4) for v4 in embedded_ipv4(parse_address(TEREDO_TO_LOOPBACK))] == ["93.184.216.34", "127.0.0.1"]
    assert [str(v4) for v4 in embedded_ipv4(parse_address("::ffff:10.0.0.1"))] == ["10.0.0.1"]
    assert embedded_ipv4(parse_address("2606:4700:4700::1111")) == []


def test_the_allow_list_lets_its_networks_through_and_nothing_else():
    allowed = parse_networks(("127.0.0.2/32", "fd00:1::/64"))

    assert address_allowed("127.0.0.2", allowed)
    assert address_allowed("::ffff:127.0.0.2", allowed)  # the same IPv4 socket
    assert address_allowed("fd00:1::5", allowed)
    assert not address_allowed("127.0.0.1", allowed)
    assert not address_allowed("64:ff9b::7f00:2", allowed)  # a translator's path, not the allowed host
    assert not address_allowed("not-an-address", allowed)


def test_one_refused_answer_refuses_the_host():
    with NameServer() as server:
        server.rebinding("mixed.test", first="127.0.0.1", then="127.0.0.1")
        servers = parse_servers([server.address])

        resolution = resolve_checked("mixed.test", allowed=parse_networks(("127.0.0.2/32",)), servers=servers)

    assert resolution.addresses == ("127.0.0.1",)
    assert "127.0.0.1" in resolution.reason


def test_configured_servers_are_asked_every_time_without_a_cache():
    with NameServer() as server:
        server.rebinding("rebind.test", first="127.0.0.2", then="127.0.0.1")
        servers = parse_servers([server.address])

        first = host_addresses("rebind.test", servers=servers)
        second = host_addresses("rebind.test", servers=servers)
        unknown = host_addresses("unknown.test", servers=servers)

    assert (first, second, unknown) == (["127.0.0.2"], ["127.0.0.1"], [])
    assert server.queries["rebind.test"] == 2


def test_literals_are_their_own_answer_and_need_no_server():
    assert host_addresses("[::ffff:127.0.0.1]", servers=[("127.0.0.1", 9)]) == ["::ffff:7f00:1"]


@pytest.mark.parametrize(
    ("entries", "parsed"),
    [
        (["10.0.0.53"], [("10.0.0.53", 53)]),
        (["127.0.0.1:5353", " "], [("127.0.0.1", 5353)]),
        (["[::1]:5353", "fd00::53"], [("::1", 5353), ("fd00::53", 53)]),
    ],
)
def test_dns_servers_are_ip_and_optional_port(entries, parsed):
    assert parse_servers(entries) == parsed


def test_a_dns_server_must_be_an_address():
    with pytest.raises(ValueError, match="not an IP address"):
        parse_servers(["dns.example:53"])


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::1]/",
        f"http://[{TEREDO_TO_LOOPBACK}]/",
        "http://[::ffff:127.0.0.1]:6379/",
        "http://[::127.0.0.1]/",
    ],
)
def test_target_check_refuses_translated_private_addresses(settings, url):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True

    with pytest.raises(TrawlError) as refused:
        target_check(url, field="url")

    assert refused.value.field == "url"


def test_target_check_honours_the_allow_list(settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    settings.TRAWL_PRIVATE_TARGETS_ALLOWED = ["127.0.0.2/32"]

    target_check("http://127.0.0.2:8000/", field="url")
    with pytest.raises(TrawlError):
        target_check("http://127.0.0.1:8000/", field="url")
