"""Politeness rules per domain and the proxies crawls leave through.

The tables keep the names the crawls app gave them before it was split.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class DomainThrottle(models.Model):
    """Politeness for one site: a cluster-wide bucket per domain and one per (egress IP, domain)."""

    domain = models.CharField(max_length=253, unique=True, help_text="Registered domain or exact host.")
    rate = models.FloatField(default=1.0, validators=[MinValueValidator(0)], help_text="Requests per second.")
    burst = models.PositiveIntegerField(default=5)
    ip_rate = models.FloatField(default=1.0, validators=[MinValueValidator(0)], help_text="Per egress IP, req/s.")
    ip_burst = models.PositiveIntegerField(default=5)
    scale = models.FloatField(
        default=1.0, validators=[MinValueValidator(0), MaxValueValidator(1)], help_text="Multiplies both rates."
    )
    blocked = models.BooleanField(default=False, help_text="Refuse every request to this domain.")
    adaptive = models.BooleanField(
        default=True, help_text="Lower the rate for every worker while the site slows down or errors (never above it)."
    )
    concurrency = models.PositiveIntegerField(
        default=8,
        validators=[MinValueValidator(1)],
        help_text="Requests to it in flight at once, across every shard and worker of the cluster.",
    )
    obey_crawl_delay = models.BooleanField(
        default=True,
        help_text="Honour the site's robots.txt Crawl-delay / Request-rate when it asks for less than this rule.",
    )
    max_pages_per_job = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pages of this domain one job fetches at most (empty: no limit)."
    )
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "crawls_domainthrottle"
        ordering = ["domain"]

    def __str__(self) -> str:
        return self.domain


class Proxy(models.Model):
    url = models.CharField(max_length=500, unique=True, help_text="e.g. http://user:pass@10.0.0.5:3128")
    egress_label = models.CharField(max_length=100, help_text="The egress IP this proxy leaves from.")
    group = models.CharField(max_length=100, blank=True, help_text="Sources may ask for a proxy group.")
    enabled = models.BooleanField(default=True)
    cooling_down_until = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        db_table = "crawls_proxy"
        ordering = ["egress_label"]
        verbose_name_plural = "proxies"

    def __str__(self) -> str:
        return f"{self.egress_label} ({self.url.rsplit('@', 1)[-1]})"
