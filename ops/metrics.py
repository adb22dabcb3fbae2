"""`GET /metrics`: Prometheus text format, built at scrape time from Redis counters and a few cheap queries.

Web processes hold no metric state of their own (gunicorn runs several, workers are elsewhere): every number comes
from the lifetime counters in Redis (ops.stats), the broker's queue lists, and the database.
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Iterator, Mapping

from django.apps import apps
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from access.services import token_authenticate
from ops.queues import queue_depths
from ops.selectors import jobs_active
from ops.stats import LIFETIME, bucket_name, busiest_domains, stats_windows
from ops.workers import workers_from_jobs
from throttling.slowed import throttle_slowed_top

logger = logging.getLogger("trawl.metrics")

# Counters kept per dimension: (name in Redis or its prefix, metric name, help, label for the prefix's rest).
COUNTERS = (
    ("jobs:", "jobs_finished", "Jobs that ended, by final status.", "status"),
    ("error:", "job_errors", "Jobs that failed or were cancelled, by error class.", "error_class"),
    ("alert:", "job_alerts", "Monitor breaches found when jobs ended, by monitor (TRAWL_MONITORS).", "monitor"),
    ("status:", "responses", "HTTP responses by status code (robots.txt excluded).", "code"),
    ("items_", "items", "Items seen, by change: new, changed, unchanged.", "change"),
    ("pages", "pages", "Pages fetched.", None),
    ("requests", "requests", "Requests sent.", None),
    ("bytes", "response_bytes", "Response body bytes downloaded.", None),
    ("throttle_waits", "throttle_waits", "Sleeps the throttle imposed before requests.", None),
    ("throttle_delayed", "throttle_delayed", "Requests the throttle delayed.", None),
    ("throttle_wait_seconds", "throttle_wait", "Seconds requests waited for throttle tokens.", None),
)
# Dimension kind -> (metric name prefix, label names of the dimension's name).
DIMENSIONS = {
    "all": ("trawl", ()),
    "domain": ("trawl_domain", ("domain",)),
    "version": ("trawl_version", ("scraper", "version")),
}


def _dimension_labels(kind: str, name: str) -> list[str]:
    if kind == "version":
        scraper, _, version = name.partition("/")
        return [scraper, version]
    return [name] if kind != "all" else []


OTHER_DOMAINS = "other"


def domains_bounded(domains: Mapping[str, Mapping[str, float]], *, keep: int) -> dict[str, dict[str, float]]:
    """The `keep` domains with the most requests as they are, every other domain summed under `other`: the label
    set stays bounded however many sites are crawled (a Prometheus series per domain ever seen would not)."""
    ranked = sorted(domains, key=lambda name: (-domains[name].get("requests", 0), name))
    bounded = {name: dict(domains[name]) for name in ranked[:keep]}
    for name in ranked[keep:]:
        other = bounded.setdefault(OTHER_DOMAINS, {})
        for field, value in domains[name].items():
            other[field] = other.get(field, 0) + value
    return bounded


def domains_rest(everything: Mapping[str, float], busiest: Mapping[str, Mapping[str, float]]) -> dict[str, dict]:
    """Every domain but the busiest, summed: what all jobs counted minus what the busiest domains did (no series per
    domain; duration buckets are not kept per domain)."""
    rest = {}
    for field, value in everything.items():
        if field.startswith("dur_le:"):
            continue
        left = value - sum(numbers.get(field, 0) for numbers in busiest.values())
        if left > 1e-9:
            rest[field] = round(left, 3)
    return {OTHER_DOMAINS: rest} if rest else {}


def counter_families(lifetime: Mapping[str, Mapping[str, Mapping[str, float]]]) -> Iterator[Metric]:
    domains = lifetime.get("domain", {})
    keep = settings.TRAWL_METRICS_MAX_DOMAINS + (OTHER_DOMAINS in domains)  # `other` summed already: not a domain
    lifetime = {**lifetime, "domain": domains_bounded(domains, keep=keep)}
    for kind, (prefix, dim_labels) in DIMENSIONS.items():
        for key, metric, doc, extra in COUNTERS:
            unit_suffix = "_seconds" if key == "throttle_wait_seconds" else ""
            labels = [*dim_labels, extra] if extra else list(dim_labels)
            family = CounterMetricFamily(f"{prefix}_{metric}{unit_suffix}", doc, labels=labels)
            for name, numbers in sorted(lifetime.get(kind, {}).items()):
                base = _dimension_labels(kind, name)
                if extra:
                    for field, value in sorted(numbers.items()):
                        if field.startswith(key):
                            family.add_metric([*base, field.removeprefix(key)], value)
                elif key in numbers:
                    family.add_metric(base, numbers[key])
            yield family


def duration_families(lifetime: Mapping[str, Mapping[str, Mapping[str, float]]]) -> Iterator[Metric]:
    bounds = sorted(settings.TRAWL_STATS_DURATION_BUCKETS)
    family = HistogramMetricFamily(
        "trawl_job_duration_seconds", "Time from a job's start to its end.", labels=["scraper", "version"]
    )
    for name, numbers in sorted(lifetime.get("version", {}).items()):
        buckets, running = [], 0
        for bound in [*bounds, math.inf]:
            running += numbers.get(f"dur_le:{bucket_name(bound)}", 0)
            buckets.append((floatToGoString(bound), running))
        if running:
            family.add_metric(_dimension_labels("version", name), buckets, numbers.get("duration", 0.0))
    yield family


def gauge_families() -> Iterator[Metric]:
    depths = queue_depths()
    queued = GaugeMetricFamily(
        "trawl_queue_messages",
        "Messages waiting in a broker queue, per priority step (0 = most urgent).",
        labels=["queue", "priority"],
    )
    for queue, depth in depths["queues"].items():
        for step, length in depth["steps"].items():
            queued.add_metric([queue, step], length)
    yield queued
    total = GaugeMetricFamily("trawl_queue_depth", "Messages waiting in a broker queue, all steps.", labels=["queue"])
    for queue, depth in depths["queues"].items():
        total.add_metric([queue], depth["total"])
    yield total
    if depths["unacked"] is not None:  # RabbitMQ does not tell it over AMQP
        unacked = "Messages taken by workers and not acknowledged yet."
        yield GaugeMetricFamily("trawl_queue_unacked_messages", unacked, value=depths["unacked"])
    jobs = GaugeMetricFamily("trawl_jobs", "Jobs queued or running now.", labels=["status"])
    for status, count in jobs_active().items():
        jobs.add_metric([status], count)
    yield jobs
    running = GaugeMetricFamily("trawl_worker_jobs_running", "Jobs each worker node runs now.", labels=["worker"])
    beat = GaugeMetricFamily(
        "trawl_worker_last_heartbeat_timestamp_seconds", "Last job heartbeat of each worker node.", labels=["worker"]
    )
    for hostname, node in sorted(workers_from_jobs().items()):
        running.add_metric([hostname], node["jobs_running"])
        if node["last_heartbeat"]:
            beat.add_metric([hostname], node["last_heartbeat"].timestamp())
    yield running
    yield beat
    yield from throttle_families()


def throttle_families() -> Iterator[Metric]:
    """The TRAWL_METRICS_MAX_DOMAINS domains the adaptive controller slowed most: their effective rate, the configured
    one, and why (`cause`); every slowed domain counted in one series. Read from the controller's index, so a scrape
    costs the same with ten slowed domains or ten thousand (throttling/slowed.py)."""
    effective = GaugeMetricFamily(
        "trawl_throttle_effective_rate",
        "Requests per second a domain gets now, after the adaptive controller (cause: errors, latency, recovering).",
        labels=["domain", "cause"],
    )
    configured = GaugeMetricFamily(
        "trawl_throttle_configured_rate",
        "Requests per second a domain's rule (or the defaults) allows.",
        labels=["domain"],
    )
    rows, slowed = throttle_slowed_top(limit=settings.TRAWL_METRICS_MAX_DOMAINS)
    for row in rows:
        effective.add_metric([row["domain"], row["cause"]], row["effective_rate"])
        configured.add_metric([row["domain"]], row["configured_rate"])
    yield effective
    yield configured
    yield GaugeMetricFamily(
        "trawl_throttle_slowed_domains",
        "Domains the adaptive controller holds below their configured rate now (the most slowed are listed above).",
        value=slowed,
    )


def delivery_families() -> Iterator[Metric]:
    """Webhook deliveries by status and event, and their attempts by outcome (when the callbacks app has them)."""
    try:
        delivery = apps.get_model("callbacks", "Delivery")
    except LookupError:
        return
    deliveries = GaugeMetricFamily(
        "trawl_webhook_deliveries", "Webhook deliveries by current status.", labels=["status", "event"]
    )
    for row in delivery.objects.values("status", "event").annotate(n=Count("pk")).order_by():
        deliveries.add_metric([row["status"], row["event"]], row["n"])
    yield deliveries
    try:
        attempt = apps.get_model("callbacks", "DeliveryAttempt")
    except LookupError:
        return
    attempts = CounterMetricFamily("trawl_webhook_attempts", "Webhook POSTs made, by outcome.", labels=["outcome"])
    counts = {row["ok"]: row["n"] for row in attempt.objects.values("ok").annotate(n=Count("pk")).order_by()}
    attempts.add_metric(["ok"], counts.get(True, 0))
    attempts.add_metric(["error"], counts.get(False, 0))
    yield attempts


class TrawlCollector:
    """Collects everything on each scrape; a source that is down is skipped (and logged), not a failed scrape."""

    def collect(self) -> Iterator[Metric]:
        sources = (self._counters, gauge_families, delivery_families)
        for source in sources:
            try:
                yield from list(source())
            except Exception:
                logger.exception("metrics: %s failed", source.__name__)

    @staticmethod
    def _counters() -> Iterator[Metric]:
        lifetime = stats_windows(windows=())[LIFETIME]
        # The busiest domains from their own hashes; every other domain is everything minus them (ops.stats).
        busiest = busiest_domains(limit=settings.TRAWL_METRICS_MAX_DOMAINS)
        lifetime["domain"] = {**busiest, **domains_rest(lifetime.get("all", {}).get("", {}), busiest)}
        yield from counter_families(lifetime)
        yield from duration_families(lifetime)


def metrics_allowed(authorization: str) -> bool:
    """`Token <t>` or `Bearer <t>` (Prometheus' `authorization` / `bearer_token`), where t is TRAWL_STATS_METRICS_TOKEN
    or an admin requester's API token. Never open: the numbers name every crawled domain."""
    scheme, _, given = authorization.strip().partition(" ")
    given = given.strip()
    if scheme.lower() not in ("token", "bearer") or not given:
        return False
    metrics_token = settings.TRAWL_STATS_METRICS_TOKEN
    if metrics_token and hmac.compare_digest(given.encode(), metrics_token.encode()):
        return True
    requester = token_authenticate(token=given)
    return requester is not None and requester.is_admin


def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request.headers.get("Authorization", "")):
        message = "Send `Authorization: Bearer <token>`: TRAWL_STATS_METRICS_TOKEN or an admin API token.\n"
        return HttpResponse(message, status=401, headers={"WWW-Authenticate": "Bearer"})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TrawlCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
