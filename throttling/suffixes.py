"""Registered domains by the Public Suffix List: `www.shop.example.co.uk` → `example.co.uk`.

The list is the snapshot tldextract ships (its ICANN section, as tldextract reads it by default), read from that file
without importing tldextract: its extractor builds a trie of dicts (~6 MiB of every crawling process, which asks for
one domain per request) and its package brings `requests` along (~2 MiB more, bench/README.md "A lighter worker").
Here the rules are three sets of strings, and a host's domain is found by looking its suffixes up from the longest,
as the list's own algorithm says (https://publicsuffix.org/list/): an exception rule wins, then the longest rule
(wildcards included); a host under no rule, an IP address or a public suffix itself is its own domain.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

SNAPSHOT = ".tld_set_snapshot"
ICANN_BEGIN, ICANN_END = "// ===BEGIN ICANN DOMAINS===", "// ===END ICANN DOMAINS==="


@dataclass(frozen=True)
class Rules:
    exact: frozenset[str]
    wildcard: frozenset[str]  # `*.ck` kept as `ck`: any one label under it is a public suffix
    exception: frozenset[str]  # `!www.ck` kept as `www.ck`: not a public suffix, though a wildcard covers it

    @classmethod
    def parse(cls, text: str) -> Rules:
        exact, wildcard, exception = set(), set(), set()
        inside = False
        for line in text.splitlines():
            line = line.strip()
            if line.startswith(ICANN_BEGIN):
                inside = True
            elif line.startswith(ICANN_END):
                break
            elif inside and line and not line.startswith("//"):
                rule = line.split()[0].lower()
                if rule.startswith("!"):
                    exception.add(rule[1:])
                elif rule.startswith("*."):
                    wildcard.add(rule[2:])
                else:
                    exact.add(rule)
        return cls(frozenset(exact), frozenset(wildcard), frozenset(exception))

    def suffix_start(self, labels: list[str]) -> int | None:
        """Index of the first label of the public suffix of `labels`, or None when no rule covers them."""
        for start in range(len(labels)):
            suffix = ".".join(labels[start:])
            if suffix in self.exception:
                return start + 1
            if suffix in self.exact:
                return start
            if start + 1 < len(labels) and ".".join(labels[start + 1 :]) in self.wildcard:
                return start
        return None


def snapshot_path() -> Path:
    """tldextract's copy of the list, found without importing the package."""
    spec = importlib.util.find_spec("tldextract")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tldextract (the Public Suffix List's snapshot) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / SNAPSHOT


@functools.cache
def rules() -> Rules:
    return Rules.parse(snapshot_path().read_text(encoding="utf-8"))


def _unicode(label: str) -> str:
    """A punycode label as the list writes it (in Unicode); any other label as it is."""
    if label.startswith("xn--"):
        import idna  # only for IDN hosts

        try:
            return idna.decode(label)
        except (UnicodeError, IndexError):
            pass
    return label


@functools.lru_cache(maxsize=8192)
def registered_domain(host: str) -> str:
    """`www.shop.example.co.uk` → `example.co.uk`. Hosts without a public suffix (IPs, localhost) are their own."""
    host = host.lower().rstrip(".")
    labels = host.split(".")
    if _is_ipv4(labels):
        return host
    start = rules().suffix_start([_unicode(label) for label in labels])
    if start is None or start == 0:
        return host
    return ".".join(labels[start - 1 :])


def _is_ipv4(labels: list[str]) -> bool:
    return len(labels) == 4 and all(
        label.isascii() and label.isdigit() and len(label) <= 3 and int(label) <= 255 for label in labels
    )
