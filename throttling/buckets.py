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
_STATUSES = {1: GRANTED, 2: GRANTED, 0: WAIT, -1: BLOCKED, -2: STALE}  # 2: granted ahead of its token
_RULES = {1: "host", 2: "domain", 3: "default"}
# How long a request waits before asking again when every in-flight slot of its domain is held: a slot frees when
# some worker's response arrives, which no clock predicts. Short, so a freed slot is not left idle.
SLOT_POLL_MS = 50
# The keys (TokenBuckets._key) a crawl writes as it runs; the rest is written by the rule mirror (services/mirror.py)
# and by the crawls a robots.txt copy may come from (robots_shared.py).
CRAWL_WRITTEN_KINDS = ("bucket", "slots", "window", "adaptive", "robots")
NEVER_SECONDS = 86400  # buckets.lua's NEVER: the longest any wait is
COPY_MS = 600_000  # on a cluster, a domain slot's copy of the rule mirror's marker (loaded_key) is copied this often


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
    obey_crawl_delay: bool = True  # the site's robots.txt Crawl-delay / Request-rate may lower both rates (robots.py)
    max_pages_per_job: int = 0  # pages of the domain one job fetches at most (0: no limit)

    def as_redis(self) -> str:
        """The rule as the script reads it: "rate burst ip_rate ip_burst scale blocked adaptive concurrency obey
        max_pages"."""
        flags = f"{int(self.blocked)} {int(self.adaptive)}"
        tail = f"{self.concurrency} {int(self.obey_crawl_delay)} {self.max_pages_per_job}"
        return f"{self.rate!r} {self.burst} {self.ip_rate!r} {self.ip_burst} {self.scale!r} {flags} {tail}"

    @classmethod
    def from_redis(cls, value: str | bytes) -> Limits:
        if isinstance(value, bytes):
            value = value.decode()
        rate, burst, ip_rate, ip_burst, scale, blocked, *rest = value.split()
        flags = (blocked == "1", rest[0] == "1" if rest else True)
        concurrency = int(rest[1]) if len(rest) > 1 else cls.concurrency
        obey = rest[2] == "1" if len(rest) > 2 else True
        max_pages = int(rest[3]) if len(rest) > 3 else 0
        numbers = (float(rate), int(burst), float(ip_rate), int(ip_burst), float(scale))
        return cls(*numbers, *flags, concurrency, obey, max_pages)


@dataclass(frozen=True)
class Decision:
    status: str  # granted | wait | blocked | stale (rules not loaded into Redis: load them, then ask again)
    wait: float = 0.0  # seconds, when status is `wait` (granted: until the next token, for requests that got none)
    rule: str = ""  # whose rule decided: host | domain | default
    granted: int = 0  # tokens taken, when status is `granted` (at most the number asked for)
    busy: bool = False  # `wait` because every in-flight slot of the domain is held (not for lack of tokens)
    after: float = 0.0  # granted ahead of its token (a take with `reserve`): seconds to wait before sending
    free_slots: int = -1  # granted with a holder: the domain's in-flight slots left free (0: every one is held now)


class TokenBuckets:
    """Takes one token from a domain's bucket and one from its (egress IP, domain) bucket, atomically, or none."""

    def __init__(
        self,
        *,
        defaults: Limits,
        prefix: str,
        slot_lease: float = 30.0,
        max_pause: float = NEVER_SECONDS,
        min_factor: float = 0.0,
    ) -> None:
        """`max_pause` (TRAWL_THROTTLE_MAX_PAUSE) and `min_factor` (the adaptive controller's) bound what the script
        reads of the values crawls write (buckets.lua): a hostile one cannot hold a domain longer or slow it further."""
        self.defaults = defaults
        self.prefix = prefix
        self.slot_lease = slot_lease
        self.bounds = f"{float(max_pause)!r} {float(min_factor)!r}"
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

    def adaptive_index_key(self) -> str:
        """The domains the adaptive controller holds below their configured rate, scored by their factor (lowest:
        most slowed), so that /metrics reads the few most slowed without walking every domain's state."""
        return f"{self.prefix}:adaptive_index"

    def robots_key(self, domain: str) -> str:
        """What the domain's robots.txt asks for (Crawl-delay / Request-rate): "rate burst delay" (robots.py)."""
        return self._key("robots", domain)

    def robots_file_key(self, scheme: str, host: str, netloc: str) -> str:
        """The body of `scheme://netloc/robots.txt` as the first crawl to fetch it read it (robots_shared.py)."""
        return f"{self.prefix}:robotsfile:{hash_tag(registered_domain(host))}:{scheme}://{netloc}"

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
        reserve: float = 0.0,
        releases: tuple[int, int] = (0, 0),
    ) -> tuple[tuple[str, ...], list[Any]]:
        args = [
            mode,
            _as_rule(self.defaults),
            self.bounds,
            pause if mode == "pause" else tokens,
            holder,
            self.slot_lease,
            SLOT_POLL_MS,
            round(reserve * 1000),
        ]
        if any(releases):  # sent only when there are some: every argument costs packing on every request
            args += releases
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
        keys += [self.robots_key(host), self.robots_key(domain)]
        return tuple(keys)

    def take(
        self, client: redis.Redis, *, host: str, egress: str, tokens: int = 1, holder: str = "", reserve: float = 0.0
    ) -> Decision:
        """Take `tokens` from both buckets, or as many as they hold (at least one), or none and say how long to wait.

        With a `holder` (one crawl process, throttling/slots.py), each token granted also takes one of the domain's
        in-flight slots for it, as many as are free: the holder gives them back as its requests end. With `reserve`,
        a take that finds no token takes the next one if it comes within that many seconds (`Decision.after`)."""
        call = self._call(
            host, egress, "take", tokens=tokens, holder=holder, cluster=on_cluster(client), reserve=reserve
        )
        decision = _decision(self.script.run(client, *call))
        # On a cluster a stale answer may only mean the domain's copy of a fresh marker ran out: copy it, ask again.
        cluster_stale = decision.status == STALE and on_cluster(client)
        if cluster_stale and (fresh_ms := _copy_ms(client.pttl(self.rules_loaded_key))):
            client.set(self.loaded_key(host), "1", px=fresh_ms)
            decision = _decision(self.script.run(client, *call))
        return decision

    async def take_async(
        self,
        client: Any,
        *,
        host: str,
        egress: str,
        tokens: int = 1,
        holder: str = "",
        reserve: float = 0.0,
        releases: tuple[int, int] = (0, 0),
    ) -> Decision:
        """`take`, on the running loop; the holder's `releases` (of the exact host's slots, of the domain's) are given
        back first, in the same call."""
        cluster = on_cluster(client)
        call = self._call(
            host, egress, "take", tokens=tokens, holder=holder, cluster=cluster, reserve=reserve, releases=releases
        )
        decision = _decision(await self.script.run_async(client, *call))
        if decision.status == STALE and cluster and (fresh_ms := _copy_ms(await client.pttl(self.rules_loaded_key))):
            await client.set(self.loaded_key(host), "1", px=fresh_ms)
            call = call[0], call[1][:8]  # given back already
            decision = _decision(await self.script.run_async(client, *call))
        return decision

    def pause(self, client: redis.Redis, *, host: str, seconds: float) -> float:
        """Empty the domain's bucket and refill nothing for `seconds`, for every worker. Returns the pause left."""
        call = self._call(host, "-", "pause", seconds, cluster=on_cluster(client))
        return self.script.run(client, *call)[1] / 1000

    async def pause_async(self, client: Any, *, host: str, seconds: float) -> float:
        call = self._call(host, "-", "pause", seconds, cluster=on_cluster(client))
        return (await self.script.run_async(client, *call))[1] / 1000


def _copy_ms(marker_pttl: int) -> int:
    """How long a domain slot's copy of the mirror's marker lives: as long as the marker, or (the marker no longer
    expires) a while, after which the next take copies it again: 0 when there is no marker (the mirror is gone)."""
    if marker_pttl == -1:
        return COPY_MS
    return max(0, marker_pttl)


def crawl_key_patterns(prefix: str) -> list[str]:
    """Redis ACL key patterns for a user that crawls with the buckets under `prefix` and is not trusted (a packaged
    crawl's child): it writes what its takes, slots, controller and robots.txt caps write, whose values buckets.lua
    reads within bounds, and reads the rest (the rule mirror, the robots.txt copies every crawl obeys) only."""
    written = [f"~{prefix}:{kind}:*" for kind in CRAWL_WRITTEN_KINDS]
    return [*written, f"~{prefix}:adaptive_index", f"%R~{prefix}:*"]


@functools.lru_cache(maxsize=64)
def _as_rule(limits: Limits) -> str:
    """The defaults as the script reads a rule: formatted once, not for every request."""
    return limits.as_redis()


def _decision(reply: list[int]) -> Decision:
    status, wait_ms, rule, *rest = (int(part) for part in reply)
    granted, busy, free = [*rest, 0, 0, -1][:3]
    after = wait_ms / 1000 if status == 2 else 0.0
    return Decision(_STATUSES[status], wait_ms / 1000, _RULES.get(rule, ""), granted, bool(busy), after, free)


def retry_after_seconds(value: bytes | str | None, *, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or None if absent or unreadable."""
    if not value:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isascii() and text.isdigit():  # `str.isdigit` alone takes '²', which float() refuses
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now) if when.tzinfo else None
