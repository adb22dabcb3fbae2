"""Throttle rules and proxies: the writes (the mirror into Redis is throttling/services/mirror.py)."""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from project.errors import TrawlError
from project.redis import get_redis, mget_across_slots, redis_key
from throttling.adaptive import AdaptiveConfig, AdaptiveState
from throttling.buckets import Limits, TokenBuckets, registered_domain
from throttling.controller import AdaptiveController
from throttling.models import DomainThrottle, Proxy

logger = logging.getLogger("trawl.throttle")

FIELDS = (
    "rate",
    "burst",
    "ip_rate",
    "ip_burst",
    "scale",
    "blocked",
    "adaptive",
    "concurrency",
    "obey_crawl_delay",
    "max_pages_per_job",
    "note",
)
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def default_limits() -> Limits:
    """The buckets of a domain no rule names, from settings."""
    return Limits(**settings.TRAWL_THROTTLE_DEFAULTS)


def throttle_buckets(
    *,
    defaults: Mapping[str, Any] | None = None,
    slot_lease: float | None = None,
    max_pause: float | None = None,
    adaptive: Mapping[str, Any] | None = None,
) -> TokenBuckets:
    """The cluster's buckets: with the project's TRAWL_THROTTLE_DEFAULTS, TRAWL_THROTTLE_SLOT_LEASE,
    TRAWL_THROTTLE_MAX_PAUSE and TRAWL_THROTTLE_ADAPTIVE, or with the values a crawl's settings carry (its Scrapy
    components read no project settings)."""
    limits = default_limits() if defaults is None else Limits(**defaults)
    lease = settings.TRAWL_THROTTLE_SLOT_LEASE if slot_lease is None else slot_lease
    pause = settings.TRAWL_THROTTLE_MAX_PAUSE if max_pause is None else max_pause
    config = _adaptive_config(settings.TRAWL_THROTTLE_ADAPTIVE if adaptive is None else adaptive)
    return TokenBuckets(
        defaults=limits,
        prefix=redis_key("throttle"),
        slot_lease=float(lease),
        max_pause=float(pause),
        min_factor=config.min_factor,
    )


def throttle_controller(*, adaptive: Mapping[str, Any] | None = None, **buckets: Any) -> AdaptiveController | None:
    """The adaptive controller every crawl feeds, or None when TRAWL_THROTTLE_ADAPTIVE (the project's, or `adaptive`
    as a crawl's settings carry it) is off; `buckets` as throttle_buckets takes them."""
    knobs = settings.TRAWL_THROTTLE_ADAPTIVE if adaptive is None else adaptive
    if not knobs.get("enabled", True):
        return None
    return AdaptiveController(buckets=throttle_buckets(adaptive=knobs, **buckets), config=_adaptive_config(knobs))


def _adaptive_config(knobs: Mapping[str, Any]) -> AdaptiveConfig:
    return AdaptiveConfig(**{name: value for name, value in knobs.items() if name != "enabled"})


def domain_normalize(value: str, *, field: str = "domain") -> str:
    """A host name or IP address as rules store it: lower case, no trailing dot, IDNA-encoded."""
    domain = (value or "").strip().lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(domain))
    except ValueError:
        pass
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        domain = ""
    labels = domain.split(".")
    if not domain or len(domain) > 253 or not all(_LABEL.match(label) for label in labels):
        raise TrawlError(f"{value!r} is not a host name: give one like example.com or shop.example.com", field=field)
    return domain


def throttle_limits(throttle: DomainThrottle) -> Limits:
    return Limits(
        rate=throttle.rate,
        burst=throttle.burst,
        ip_rate=throttle.ip_rate,
        ip_burst=throttle.ip_burst,
        scale=throttle.scale,
        blocked=throttle.blocked,
        adaptive=throttle.adaptive,
        concurrency=throttle.concurrency,
        obey_crawl_delay=throttle.obey_crawl_delay,
        max_pages_per_job=throttle.max_pages_per_job or 0,
    )


@transaction.atomic
def throttle_create(*, domain: str, **fields: Any) -> DomainThrottle:
    """A rule for `domain`; fields left out take the defaults unknown domains get."""
    values = {**asdict(default_limits()), "blocked": False, "note": ""}
    values["max_pages_per_job"] = values["max_pages_per_job"] or None
    values.update({name: value for name, value in fields.items() if name in FIELDS})
    if DomainThrottle.objects.filter(domain=domain_normalize(domain)).exists():
        raise TrawlError(f"{domain} already has a throttle rule; change it with PUT or PATCH", field="domain")
    return throttle_save(throttle=DomainThrottle(domain=domain, **values))


@transaction.atomic
def throttle_update(*, throttle: DomainThrottle, **fields: Any) -> DomainThrottle:
    """Change some fields (a new `domain` renames the rule); running crawls obey the change on their next request."""
    for name, value in fields.items():
        if name in (*FIELDS, "domain"):
            setattr(throttle, name, value)
    return throttle_save(throttle=throttle)


@transaction.atomic
def throttle_save(*, throttle: DomainThrottle) -> DomainThrottle:
    """Validate and store a rule (new or changed, e.g. by the admin) and publish it to Redis on commit."""
    throttle.domain = domain_normalize(throttle.domain)
    taken = DomainThrottle.objects.filter(domain=throttle.domain).exclude(pk=throttle.pk).exists()
    if taken:
        raise TrawlError(f"{throttle.domain} already has a throttle rule", field="domain")
    for name in ("burst", "ip_burst"):
        if getattr(throttle, name) < 1:
            raise TrawlError(f"{name} must be at least 1 (to stop all requests, set blocked)", field=name)
    try:
        throttle.full_clean(validate_unique=False)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise TrawlError(messages[0], field=field) from exc
    throttle.max_pages_per_job = throttle.max_pages_per_job or None  # 0 (the defaults' "no limit") is stored as none
    previous = DomainThrottle.objects.filter(pk=throttle.pk).values_list("domain", flat=True).first()
    throttle.save()
    domain, limits = throttle.domain, throttle_limits(throttle)
    # robust: with Redis down the rule is still saved; the mirror catches up at its next reload (RULES_TTL).
    transaction.on_commit(lambda: throttle_publish(domain=domain, limits=limits, previous=previous), robust=True)
    return throttle


@transaction.atomic
def throttle_delete(*, throttle: DomainThrottle) -> None:
    domain = throttle.domain
    throttle.delete()
    transaction.on_commit(lambda: throttle_publish(domain=domain, limits=None), robust=True)


def throttle_publish(*, domain: str, limits: Limits | None, previous: str | None = None) -> None:
    """Mirror one rule into Redis (None removes it).

    The version goes up before the rule is written: a full reload that read the database before this rule was there
    either sees the new version and loads again, or finished writing before this rule is written. The rule and the
    mirror's bookkeeping live in different Redis Cluster slots, hence two steps, never one transaction."""
    buckets, client = throttle_buckets(), get_redis()
    with client.pipeline(transaction=True) as pipe:
        pipe.incr(buckets.version_key)
        if previous and previous != domain:
            pipe.srem(buckets.rules_index_key, previous)
        if limits is None:
            pipe.srem(buckets.rules_index_key, domain)
        else:
            pipe.sadd(buckets.rules_index_key, domain)
        pipe.execute()
    with client.pipeline(transaction=False) as pipe:
        if previous and previous != domain:
            pipe.delete(buckets.rule_key(previous))
        if limits is None:
            pipe.delete(buckets.rule_key(domain))
        else:
            pipe.set(buckets.rule_key(domain), limits.as_redis())
        pipe.execute()
    logger.info("throttle rule published domain=%s limits=%s", domain, limits)


def throttle_adaptive_states(domains: list[str]) -> dict[str, AdaptiveState]:
    """The controller's current state of each domain (a factor of 1 where it has none); Redis away: all at 1."""
    if not domains:
        return {}
    buckets = throttle_buckets()
    try:
        values = mget_across_slots(get_redis(), [buckets.state_key(domain) for domain in domains])
    except redis.RedisError:
        return {domain: AdaptiveState() for domain in domains}
    return {domain: AdaptiveState.from_redis(value) for domain, value in zip(domains, values, strict=True)}


def throttle_effective(throttle: DomainThrottle, state: AdaptiveState | None = None) -> dict[str, Any]:
    """What a rule's domain gets right now: requests per second for the domain bucket and each egress IP, and why."""
    if throttle.blocked:
        return {"effective_rate": 0.0, "effective_ip_rate": 0.0, "adaptive_factor": 0.0, "adaptive_reason": "blocked"}
    if state is None:
        state = throttle_adaptive_states([throttle.domain])[throttle.domain]
    factor = state.factor if throttle.adaptive else 1.0
    reason = state.reason if throttle.adaptive else "adaptive off for this rule: the configured rate"
    return {
        "effective_rate": round(throttle.rate * throttle.scale * factor, 4),
        "effective_ip_rate": round(throttle.ip_rate * throttle.scale * factor, 4),
        "adaptive_factor": round(factor, 4),
        "adaptive_reason": reason or "at the configured rate",
    }


def throttle_robots(throttle: DomainThrottle) -> dict[str, Any]:
    """What the rule's site asked for in its robots.txt, as a crawl last read it (throttling/robots.py): seconds
    between requests (None: nothing, or not read within TRAWL_THROTTLE_ROBOTS_TTL), and whether it applies."""
    return throttle_robots_many([throttle])[throttle.domain]


def throttle_robots_many(throttles: list[DomainThrottle]) -> dict[str, dict[str, Any]]:
    """throttle_robots of each rule, read in one MGET (a page of the API's list); Redis away: nothing known."""
    if not throttles:
        return {}
    try:
        keys = [throttle_buckets().robots_key(throttle.domain) for throttle in throttles]
        values = mget_across_slots(get_redis(), keys)
    except redis.RedisError:
        values = [None] * len(throttles)
    return {throttle.domain: _robots(throttle, value) for throttle, value in zip(throttles, values, strict=True)}


def _robots(throttle: DomainThrottle, value: str | bytes | None) -> dict[str, Any]:
    if not value:
        return {"robots_delay": None, "robots_reason": "no Crawl-delay or Request-rate (as last read)"}
    rate, _, delay = (float(part) for part in (value.decode() if isinstance(value, bytes) else value).split()[:3])
    if not throttle.obey_crawl_delay:
        return {"robots_delay": delay, "robots_reason": f"{delay:g}s between requests, ignored by this rule"}
    applies = "applies" if rate < throttle.rate * throttle.scale else "the rule is slower already"
    return {"robots_delay": delay, "robots_reason": f"{delay:g}s between requests ({applies})"}


def throttle_for_host(host: str) -> DomainThrottle | None:
    """The rule that applies to a host: its own if it has one, else its registered domain's."""
    host = host.lower().rstrip(".")
    rules = {row.domain: row for row in DomainThrottle.objects.filter(domain__in={host, registered_domain(host)})}
    return rules.get(host) or rules.get(registered_domain(host))


def throttle_check_url(*, url: str, field: str = "url") -> None:
    """Refuse a crawl of a blocked domain before it is queued."""
    host = urlsplit(url).hostname or ""
    rule = throttle_for_host(host) if host else None
    if rule is not None and rule.blocked:
        raise TrawlError(f"{host} is blocked (throttle rule for {rule.domain}): Trawl does not crawl it", field=field)


def proxy_cool_down(*, url: str, seconds: float) -> None:
    """Rest a proxy a site blocked: no worker picks it until then (each sees it at its next proxy refresh)."""
    until = timezone.now() + timedelta(seconds=seconds)
    Proxy.objects.filter(url=url).exclude(cooling_down_until__gt=until).update(cooling_down_until=until)
    logger.info("proxy cooling down url=%s until=%s", url.rsplit("@", 1)[-1], until.isoformat())


def proxies_cool_down_end(*, proxies: Any) -> int:
    return proxies.update(cooling_down_until=None)
