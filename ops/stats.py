"""Rolling counters of finished jobs, kept in Redis so reading them is cheap.

A finished job adds its numbers (jobs by status, pages, bytes, items, status codes, throttle waits, errors) to the
bucket of the minute and of the hour it ended in, and to a lifetime hash — once for each dimension it belongs to:
everything, its domain, its scraper, its scraper version. A window of N seconds is the sum of its last N/60 minutes,
the current one included: whole hours come from hour buckets and the ragged ends from minute buckets, so the day
window costs 23-24 hour reads and at most 60 minute reads instead of 1440. Buckets expire two hours after the longest
window. The lifetime hash holds only dimensions that do not grow with the sites crawled (everything, scrapers,
versions); a domain's lifetime is a small hash of its own that expires once nobody crawled the domain for
TRAWL_STATS_DOMAIN_TTL, with the domains ranked by requests in a sorted set (pruned of expired ones as jobs end), so
that /metrics reads the busiest few and sums the rest as everything minus them, never every domain.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings

from project.redis import get_redis, stats_key

FINAL_STATUSES = ("succeeded", "failed", "cancelled", "dead")
ITEM_CHANGES = ("new", "changed", "unchanged")
# Plain sums a job contributes, by name in the counters: (counter, key in job stats).
JOB_SUMS = (("pages", "pages"), ("bytes", "bytes"), ("requests", "requests"))
LIFETIME = "lifetime"
clock = time.time  # the one clock the counters read; tests replace it
# A job's numbers added to one hash in one call, not one HINCRBYFLOAT each (~200 a job, parsed by redis-py and Redis
# alike). Floats for all: Redis prints whole sums as integers, and HINCRBY would refuse a field once fractional.
# EVAL, not EVALSHA: a pipeline cannot load a missing script and re-run only the commands that failed (and sent as a
# plain command: a cluster pipeline's `eval` method is something else).
HASH_ADD = "for i = 1, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1]) end return 0"


def _key(*parts: Any) -> str:
    return stats_key(*parts)


def throttle_numbers(stats: Mapping[str, Any]) -> dict[str, float]:
    """Throttle waits of a job from its stats: flat Scrapy keys (`throttle/waits`) or a nested `throttle` dict."""
    nested = stats.get("throttle") if isinstance(stats.get("throttle"), Mapping) else {}
    numbers = {}
    # The summed wait is `wait_seconds_total` in a job's stats; jobs stored before the rename say `wait_seconds`.
    for name, keys in (
        ("waits", ("waits",)),
        ("wait_seconds", ("wait_seconds_total", "wait_seconds")),
        ("delayed", ("delayed",)),
    ):
        candidates = [
            value
            for key in keys
            for value in (stats.get(f"throttle/{key}"), nested.get(key), nested.get(f"throttle/{key}"))
        ]
        numbers[name] = next((v for v in candidates if isinstance(v, int | float) and not isinstance(v, bool)), 0)
    return numbers


def version_label(scraper: str, version: str | None) -> str:
    return f"{scraper}/{version or 'none'}"


def job_dimensions(
    *, domain: str, scraper: str, version: str | None, tenant: int | None = None
) -> list[tuple[str, str]]:
    """(kind, name) pairs a job counts under. `all` has the empty name. With a tenant, each pair is counted a second
    time under the tenant's own kinds (`t<id>.domain`...), which is all that tenant's token reads back."""
    dimensions = [
        ("all", ""),
        ("domain", domain or "-"),
        ("scraper", scraper),
        ("version", version_label(scraper, version)),
    ]
    if tenant is None:
        return dimensions
    return [*dimensions, *((tenant_kind(tenant, kind), name) for kind, name in dimensions)]


def tenant_kind(tenant: int, kind: str) -> str:
    return f"t{tenant}.{kind}"


def job_numbers(
    *,
    status: str,
    error_class: str = "",
    stats: Mapping[str, Any] | None,
    duration: float | None = None,
    alerts: Iterable[Mapping[str, Any]] = (),
) -> dict[str, float]:
    """The counters one finished job adds, from its final status and stats. Pure: no Redis, no database."""
    stats = stats or {}
    numbers: dict[str, float] = {f"jobs:{status}": 1}
    for alert in alerts:  # by monitor kind: `min_coverage.price` counts as min_coverage (few label values)
        kind = f"alert:{str(alert.get('monitor', '')).split('.', 1)[0]}"
        numbers[kind] = numbers.get(kind, 0) + 1
    if error_class:
        numbers[f"error:{error_class}"] = 1
    for counter, key in JOB_SUMS:
        numbers[counter] = _number(stats.get(key))
    for change in ITEM_CHANGES:
        numbers[f"items_{change}"] = _number(stats.get(f"items_{change}"))
    for code, count in (stats.get("status_codes") or {}).items():
        numbers[f"status:{code}"] = _number(count)
    for name, value in throttle_numbers(stats).items():
        numbers[f"throttle_{name}"] = value
    if duration is not None:
        numbers["duration"] = round(duration, 3)
        numbers["timed"] = 1
    return {name: value for name, value in numbers.items() if value}


def duration_bucket(duration: float, buckets: Iterable[float]) -> str:
    """The histogram bucket (its upper bound, Prometheus' `le`) a duration falls in."""
    bounds = sorted(buckets)
    index = bisect_left(bounds, duration)
    return bucket_name(bounds[index] if index < len(bounds) else math.inf)


def bucket_name(bound: float) -> str:
    """How a bucket's bound is written in the counters' field names: `5`, `0.5`, `+Inf`."""
    if math.isinf(bound):
        return "+Inf"
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def stats_record(
    *, at: float, dimensions: list[tuple[str, str]], numbers: Mapping[str, float], duration: float | None = None
) -> None:
    """Add one job's numbers to the minute, hour and lifetime counters of every dimension, in one round trip."""
    minute, hour = int(at) // 60, int(at) // 3600
    keep = max(settings.TRAWL_STATS_WINDOWS) + 7200
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    additions: defaultdict[str, dict[str, float]] = defaultdict(dict)  # hash → field → amount
    for kind, name in dimensions:
        lifetime = _key("total") if not is_domain_kind(kind) else domain_total_key(kind, name)
        for bucket in (_key("m", minute), _key("h", hour), lifetime):
            additions[bucket].update({f"{kind}|{name}|{metric}": value for metric, value in numbers.items()})
        if is_domain_kind(kind):
            pipe.zincrby(_key("domains", kind), numbers.get("requests", 0), name)
            pipe.zadd(_key("domains_seen", kind), {name: at})
    if duration is not None:
        le = duration_bucket(duration, settings.TRAWL_STATS_DURATION_BUCKETS)
        for kind, name in dimensions:
            if kind in ("all", "version"):
                additions[_key("total")][f"{kind}|{name}|dur_le:{le}"] = 1
    for bucket, fields in additions.items():
        pipe.execute_command("EVAL", HASH_ADD, 1, bucket, *(part for pair in fields.items() for part in pair))
    for kind, name in dimensions:
        if is_domain_kind(kind):
            pipe.expire(domain_total_key(kind, name), settings.TRAWL_STATS_DOMAIN_TTL)
    pipe.expire(_key("m", minute), keep)
    pipe.expire(_key("h", hour), keep)
    pipe.execute()
    _forget_idle_domains(client, kinds=[kind for kind, _ in dimensions if is_domain_kind(kind)], now=at)


def is_domain_kind(kind: str) -> bool:
    """Dimensions that grow with every site crawled: `domain`, and each tenant's (`t3.domain`)."""
    return kind == "domain" or kind.endswith(".domain")


def domain_total_key(kind: str, name: str) -> str:
    return _key("total", kind, name)


def _forget_idle_domains(client: Any, *, kinds: list[str], now: float, batch: int = 100) -> None:
    """Take domains whose lifetime hash expired (idle for TRAWL_STATS_DOMAIN_TTL) out of the rankings, a batch per
    finished job: the rankings stay as long as the domains crawled recently, never every domain ever seen."""
    cutoff = now - settings.TRAWL_STATS_DOMAIN_TTL
    for kind in kinds:
        idle = client.zrangebyscore(_key("domains_seen", kind), "-inf", cutoff, start=0, num=batch)
        if idle:
            client.zrem(_key("domains_seen", kind), *idle)
            client.zrem(_key("domains", kind), *idle)


def busiest_domains(*, kind: str = "domain", limit: int) -> dict[str, dict[str, float]]:
    """The lifetime counters of the `limit` domains with the most requests (of those crawled within
    TRAWL_STATS_DOMAIN_TTL): one ZREVRANGE and `limit` small hashes."""
    client = get_redis()
    names = client.zrevrange(_key("domains", kind), 0, max(0, limit - 1)) if limit > 0 else []
    return domain_totals(kind=kind, names=names)


def domain_totals(*, kind: str, names: Iterable[str]) -> dict[str, dict[str, float]]:
    """The lifetime counters of the named domains, each from its own hash."""
    names = list(names)
    pipe = get_redis().pipeline(transaction=False)
    for name in names:
        pipe.hgetall(domain_total_key(kind, name))
    folded = _fold(pipe.execute())
    return folded.get(kind, {})


def window_buckets(*, now: float, seconds: int) -> list[str]:
    """Keys of the buckets whose sum is the last `seconds` (whole minutes, the current one included)."""
    last = int(now) // 60
    first = last - max(1, seconds // 60) + 1
    first_hour, end_hour = -(-first // 60), (last + 1) // 60  # hours wholly inside [first, last]: [first_hour, end)
    if first_hour >= end_hour:
        return [_key("m", m) for m in range(first, last + 1)]
    minutes = [*range(first, first_hour * 60), *range(end_hour * 60, last + 1)]
    return [_key("h", h) for h in range(first_hour, end_hour)] + [_key("m", m) for m in minutes]


def stats_windows(*, now: float | None = None, windows: Iterable[int] | None = None) -> dict[str, dict]:
    """{window: {kind: {name: {metric: value}}}} for each rolling window (seconds) and `lifetime`."""
    now = clock() if now is None else now
    windows = list(settings.TRAWL_STATS_WINDOWS if windows is None else windows)
    plan = {str(seconds): window_buckets(now=now, seconds=seconds) for seconds in windows}
    plan[LIFETIME] = [_key("total")]
    keys = sorted({key for keys in plan.values() for key in keys})
    pipe = get_redis().pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    hashes = dict(zip(keys, pipe.execute(), strict=True))
    folded = {window: _fold(hashes[key] for key in bucket_keys) for window, bucket_keys in plan.items()}
    # A domain's lifetime is its own hash: read for the domains the windows show (crawled within the longest one)
    # and the busiest ones, when windows are asked for (/metrics asks for none and reads the busiest itself).
    lifetime = folded[LIFETIME]
    if not windows:
        return folded
    kinds = {"domain", *(f"{kind.split('.')[0]}.domain" for kind in lifetime if "." in kind)}
    client, top = get_redis(), settings.TRAWL_METRICS_MAX_DOMAINS
    for kind in sorted(kinds):
        names = {name for window, found in folded.items() if window != LIFETIME for name in found.get(kind, {})}
        names.update(client.zrevrange(_key("domains", kind), 0, top - 1))
        if names:
            lifetime[kind] = domain_totals(kind=kind, names=sorted(names))
    return folded


def stats_per_minute(
    *, kind: str = "all", name: str = "", prefix: str = "jobs:", minutes: int = 60, now: float | None = None
) -> list[tuple[int, dict[str, float]]]:
    """[(minute start as unix seconds, {metric without prefix: value})] for the last `minutes`, oldest first."""
    now = clock() if now is None else now
    last = int(now) // 60
    span = range(last - minutes + 1, last + 1)
    pipe = get_redis().pipeline(transaction=False)
    for minute in span:
        pipe.hgetall(_key("m", minute))
    head = f"{kind}|{name}|{prefix}"
    series = []
    for minute, bucket in zip(span, pipe.execute(), strict=True):
        values = {field.removeprefix(head): _parse(v) for field, v in bucket.items() if field.startswith(head)}
        series.append((minute * 60, values))
    return series


def _fold(buckets: Iterable[Mapping[str, str]]) -> dict[str, dict[str, dict[str, float]]]:
    total: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for bucket in buckets:
        for field, value in bucket.items():
            kind, name, metric = field.split("|", 2)
            total[kind][name][metric] += _parse(value)
    return {
        kind: {name: {metric: _tidy(value) for metric, value in metrics.items()} for name, metrics in names.items()}
        for kind, names in total.items()
    }


def summarize(metrics: Mapping[str, float]) -> dict[str, Any]:
    """One dimension's raw counters as the API shows them."""
    jobs = {status: int(metrics.get(f"jobs:{status}", 0)) for status in FINAL_STATUSES}
    jobs["total"] = sum(jobs.values())
    timed = metrics.get("timed", 0)
    return {
        "jobs": jobs,
        "pages": int(metrics.get("pages", 0)),
        "requests": int(metrics.get("requests", 0)),
        "bytes": int(metrics.get("bytes", 0)),
        **{f"items_{change}": int(metrics.get(f"items_{change}", 0)) for change in ITEM_CHANGES},
        "status_codes": _with_prefix(metrics, "status:"),
        "error_classes": _with_prefix(metrics, "error:"),
        "throttle_waits": int(metrics.get("throttle_waits", 0)),
        "throttle_delayed": int(metrics.get("throttle_delayed", 0)),
        "throttle_wait_seconds": round(metrics.get("throttle_wait_seconds", 0.0), 3),
        "mean_duration": round(metrics.get("duration", 0.0) / timed, 3) if timed else None,
    }


def _with_prefix(metrics: Mapping[str, float], prefix: str) -> dict[str, int]:
    return {key.removeprefix(prefix): int(v) for key, v in sorted(metrics.items()) if key.startswith(prefix)}


def _number(value: Any) -> float:
    # Finite only: Redis refuses a NaN or an infinite increment, which would stop the script adding a hash's fields.
    return value if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else 0


def _parse(value: str) -> float:
    return float(value)


def _tidy(value: float) -> float:
    return int(value) if float(value).is_integer() else round(value, 3)
