"""Registered domains (throttling/suffixes.py): the Public Suffix List's answer, as tldextract gave it before, for
every rule of the list, without tldextract's trie or any network."""

from __future__ import annotations

import contextlib
import warnings

import idna
import pytest
import tldextract

from throttling.suffixes import Rules, registered_domain, rules


def tldextract_domain(extract: tldextract.TLDExtract, host: str) -> str:
    """What the throttle keyed on before (tldextract's ICANN section, its shipped snapshot)."""
    host = host.lower().rstrip(".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return extract(host).top_domain_under_public_suffix or host


def hosts_of_every_rule(found: Rules) -> list[str]:
    """Each rule as a host, one and two labels under it, in Unicode and in punycode (as URLs carry them)."""
    names = [*found.exact, *(f"x.{rule}" for rule in found.wildcard), *found.exception]
    hosts = []
    for name in names:
        for host in (name, f"shop.{name}", f"www.shop.{name}"):
            hosts.append(host)
            with contextlib.suppress(idna.IDNAError):  # a name IDNA 2008 refuses never reaches a URL
                hosts.append(idna.encode(host).decode())
    return hosts


def test_every_rule_of_the_list_gives_the_domain_tldextract_gave():
    extract = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)
    found = rules()
    hosts = hosts_of_every_rule(found)

    differ = [(host, tldextract_domain(extract, host), registered_domain(host)) for host in hosts]
    differ = [case for case in differ if case[1] != case[2]]

    assert len(found.exact) > 6_000 and found.wildcard and found.exception  # the ICANN section was read
    assert len(hosts) > 30_000
    assert differ == []


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.shop.example.co.uk", "example.co.uk"),
        ("a.b.example.com", "example.com"),
        ("WWW.Example.COM.", "example.com"),
        ("127.0.0.1", "127.0.0.1"),  # an address is its own domain
        ("10.0.0.7", "10.0.0.7"),
        ("localhost", "localhost"),  # under no rule
        ("a.b.internal", "a.b.internal"),
        ("co.uk", "co.uk"),  # a public suffix itself
        ("a.b.x.ck", "b.x.ck"),  # wildcard *.ck: x.ck is a public suffix
        ("a.www.ck", "www.ck"),  # exception !www.ck
        ("shop.xn--p1ai", "shop.xn--p1ai"),  # .рф in punycode, as a URL's host carries it
    ],
)
def test_named_cases(host, domain):
    assert registered_domain(host) == domain
