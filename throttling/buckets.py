"""Politeness token buckets in Redis, shared by every worker: key names, the Lua script, what its answer means.

The rule itself (refill, take from both buckets or neither, how long to wait) is `buckets.lua`, run with EVALSHA
so every decision is atomic and costs one round trip. Time comes from Redis `TIME`. This module only names keys,
resolves a host to the domains whose rules may apply, and runs the script (blocking or asyncio). It reads no Django
setting: the benchmark and the Scrapy middleware use it as is.

Every key of a host carries its registered domain as hash tag (`rule:{example.com}:shop.example.com`), so one take
touches one Redis Cluster slot. The mirror's bookkeeping (rule index, version, freshness) shares the tag `{rules}`;
on a single Redis the take reads that freshness marker itself, on a cluster (another slot) it reads a copy kept in the
domain's slot, `loaded:{example.com}`, copied from the marker for as long as the marker lasts.
"""

from __future__ import annotations

import email.utils
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from project.redis import LuaScript, hash_tag, on_cluster
from throttling.suffixes import registered_domain

SCRIPT = Path(__file__).with_name("buckets.lua").read_text()
GRANTED, WAIT, BLOCKED, STALE = "granted", "wait", "blocked", "stale"
_STATUSES = {1: GRANTED, 0: WAIT, -1: BLOCKED, -2: STALE}
_RULES = {1: "host", 2: "domain", 3: "default"}
# How long a request waits before asking again when every in-flight slot of its domain is held: a slot frees when
# some worker's response arrives, which no clock predicts. Short, so a freed slot is not left idle.
SLOT_POLL_MS = 50


@dataclass(frozen=True)
class Limits:
    """One domain's politeness: the domain bucket, each (egress IP, domain) bucket, a scale on both rates."""

    rate: float
    burst: int
    ip_rate: float
    ip_burst: int
    scale: float = 1.0
    blocked: bool = False
    adaptive: bool = True  # the controller may lower both rates when the site slows or errors (adaptive.py)
    concurrency: int = 8  # requests in flight at once, cluster-wide (slots, held by workers that take with a holder)

    def as_redis(self) -> str:
        """The rule as the script reads it: "rate burst ip_rate ip_burst scale blocked adaptive concurrency"."""
        flags = f"{int(self.blocked)} {int(self.adaptive)}"
        return f"{self.rate!r} {self.burst} {self.ip_rate!r} {self.ip_burst} {self.scale!r} {flags} {self.concurrency}"

    @classmethod
    def from_redis(cls, value: str) -> Limits:
        rate, burst, ip_rate, ip_burst, scale, blocked, *rest = value.split()
        flags = (blocked == "1", rest[0] == "1" if rest else True)
        concurrency = int(rest[1]) if len(rest) > 1 else cls.concurrency
        return cls(float(rate), int(burst), float(ip_rate), int(ip_burst), float(scale), *flags, concurrency)


@dataclass(frozen=True)
class Decision:
    status: str  # granted | wait | blocked | stale (rules not loaded into Redis: load them, then ask again)
    wait: float = 0.0  # seconds, when status is `wait` (granted: until the next token, for requests that got none)
    rule: str = ""  # whose rule decided: host | domain | default
    granted: int = 0  # tokens taken, when status is `granted` (at most the number asked for)
    busy: bool = False  # `wait` because every in-flight slot of the domain is held (not for lack of tokens)


class TokenBuckets:
    """Takes one token from a domain's bucket and one from its (egress IP, domain) bucket, atomically, or none."""

    def __init__(self, *, defaults: Limits, prefix: str, slot_lease: float = 30.0) -> None:
        self.defaults = defaults
        self.prefix = prefix
        self.slot_lease = slot_lease
        self.script = LuaScript(SCRIPT)
        rules = hash_tag("rules")
        self.rules_loaded_key = f"{prefix}:{rules}:loaded"
        self.rules_index_key = f"{prefix}:{rules}:index"
        self.version_key = f"{prefix}:{rules}:version"

    def _key(self, kind: str, domain: str) -> str:
        """`<prefix>:<kind>:{<registered domain>}:<host or domain>`: a host's keys share its domain's slot."""
        return f"{self.prefix}:{kind}:{hash_tag(registered_domain(domain))}:{domain}"

    @staticmethod
    def domain_of_key(key: str) -> str:
        """The host or domain a key of `_key` belongs to."""
        return key.rsplit("}:", 1)[-1]

    def rule_key(self, domain: str) -> str:
        return self._key("rule", domain)

    def bucket_key(self, domain: str, egress: str | None = None) -> str:
        return self._key("bucket", domain) + (f":ip:{egress}" if egress is not None else "")

    def state_key(self, domain: str) -> str:
        """The adaptive controller's state of a domain: "factor baseline reason" (throttling/adaptive.py)."""
        return self._key("adaptive", domain)

    def window_key(self, domain: str) -> str:
        return self._key("window", domain)

    def slots_key(self, domain: str) -> str:
        """Who holds the domain's in-flight slots: a hash of holder → "count expiry" (throttling/slots.py)."""
        return self._key("slots", domain)

    def loaded_key(self, domain: str) -> str:
        """On a cluster, the copy of the rule mirror's freshness marker in a registered domain's slot."""
        return f"{self.prefix}:loaded:{hash_tag(registered_domain(domain))}"

    def slots_domain(self, host: str, decision: Decision) -> str:
        """Whose slots a granted take counted against: the exact host's when its own rule decided, else the domain's."""
        host = host.lower().rstrip(".")
        return host if decision.rule == "host" else registered_domain(host)

    def _call(
        self,
        host: str,
        egress: str,
        mode: str,
        pause: float = 0.0,
        tokens: int = 1,
        holder: str = "",
        cluster: bool = False,
    ) -> tuple[tuple[str, ...], list[Any]]:
        args = [mode, _as_rule(self.defaults), pause, tokens, holder, self.slot_lease, SLOT_POLL_MS]
        return self._keys(host, egress, cluster), args

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - a few TokenBuckets per process, each asked for a few hosts
    def _keys(self, host: str, egress: str, cluster: bool) -> tuple[str, ...]:
        """The script's KEYS for a host: built once per (host, egress IP), not for every request."""
        host = host.lower().rstrip(".")
        domain = registered_domain(host)
        keys = [self.rule_key(host), self.rule_key(domain), self.loaded_key(host) if cluster else self.rules_loaded_key]
        keys += [self.bucket_key(host), self.bucket_key(host, egress)]
        keys += [self.bucket_key(domain), self.bucket_key(domain, egress)]
        keys += [self.state_key(host), self.state_key(domain), self.slots_key(host), self.slots_key(domain)]
        return tuple(keys)

    def take(self, client: redis.Redis, *, host: str, egress: str, tokens: int = 1, holder: str = "") -> Decision:
        """Take `tokens` from both buckets, or as many as they hold (at least one), or none and say how long to wait.

        With a `holder` (one crawl process, throttling/slots.py), each token granted also takes one of the domain's
        in-flight slots for it, as many as are free: the holder gives them back as its requests end."""
        call = self._call(host, egress, "take", tokens=tokens, holder=holder, cluster=on_cluster(client))
        decision = _decision(self.script.run(client, *call))
        # On a cluster a stale answer may only mean the domain's copy of a fresh marker ran out: copy it, ask again.
        if decision.status == STALE and on_cluster(client) and (fresh_ms := client.pttl(self.rules_loaded_key)) > 0:
            client.set(self.loaded_key(host), "1", px=fresh_ms)
            decision = _decision(self.script.run(client, *call))
        return decision

    async def take_async(self, client: Any, *, host: str, egress: str, tokens: int = 1, holder: str = "") -> Decision:
        call = self._call(host, egress, "take", tokens=tokens, holder=holder, cluster=on_cluster(client))
        decision = _decision(await self.script.run_async(client, *call))
        cluster_stale = decision.status == STALE and on_cluster(client)
        if cluster_stale and (fresh_ms := await client.pttl(self.rules_loaded_key)) > 0:
            await client.set(self.loaded_key(host), "1", px=fresh_ms)
            decision = _decision(await self.script.run_async(client, *call))
        return decision

    def pause(self, client: redis.Redis, *, host: str, seconds: float) -> float:
        """Empty the domain's bucket and refill nothing for `seconds`, for every worker. Returns the pause left."""
        call = self._call(host, "-", "pause", seconds, cluster=on_cluster(client))
        return self.script.run(client, *call)[1] / 1000

    async def pause_async(self, client: Any, *, host: str, seconds: float) -> float:
        call = self._call(host, "-", "pause", seconds, cluster=on_cluster(client))
        return (await self.script.run_async(client, *call))[1] / 1000


@functools.lru_cache(maxsize=64)
def _as_rule(limits: Limits) -> str:
    """The defaults as the script reads a rule: formatted once, not for every request."""
    return limits.as_redis()


def _decision(reply: list[int]) -> Decision:
    status, wait_ms, rule, *rest = (int(part) for part in reply)
    granted, busy = [*rest, 0, 0][:2]
    return Decision(_STATUSES[status], wait_ms / 1000, _RULES.get(rule, ""), granted, bool(busy))


def retry_after_seconds(value: bytes | str | None, *, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or None if absent or unreadable."""
    if not value:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now) if when.tzinfo else None
