"""API input and output shapes for throttle rules."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from project.errors import TrawlError
from project.web.serializers import StrictSerializer
from throttling.models import DomainThrottle
from throttling.services import domain_normalize, throttle_effective, throttle_robots


def host_name(value: str) -> None:
    try:
        domain_normalize(value)
    except TrawlError as exc:
        raise serializers.ValidationError(exc.message) from exc


class ThrottleInputSerializer(StrictSerializer):
    """A throttle rule as PUT and PATCH take it; fields left out of a PUT take the defaults unknown domains get."""

    domain = serializers.CharField(
        max_length=253, required=False, validators=[host_name], help_text="Registered domain or exact host."
    )
    rate = serializers.FloatField(min_value=0, max_value=100_000, required=False, help_text="Requests per second.")
    burst = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False)
    ip_rate = serializers.FloatField(min_value=0, max_value=100_000, required=False, help_text="Per egress IP, req/s.")
    ip_burst = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False)
    scale = serializers.FloatField(min_value=0, max_value=1, required=False, help_text="Multiplies both rates.")
    blocked = serializers.BooleanField(required=False, help_text="Refuse every request to this domain.")
    adaptive = serializers.BooleanField(
        required=False, help_text="Slow down for every worker while the site slows or errors (default true)."
    )
    concurrency = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="Requests in flight at once to this domain, counted across every worker (default 8).",
    )
    obey_crawl_delay = serializers.BooleanField(
        required=False, help_text="Honour robots.txt Crawl-delay / Request-rate below this rule (default true)."
    )
    max_pages_per_job = serializers.IntegerField(
        min_value=1,
        max_value=100_000_000,
        required=False,
        allow_null=True,
        help_text="Pages of this domain one job fetches at most (null: no limit).",
    )
    note = serializers.CharField(allow_blank=True, max_length=2000, required=False)


class ThrottleCreateSerializer(ThrottleInputSerializer):
    domain = serializers.CharField(max_length=253, validators=[host_name], help_text="Registered domain or exact host.")


class ThrottleSerializer(serializers.ModelSerializer):
    """A rule, and what its domain gets now: `effective_rate` (req/s, after scale and the adaptive controller) and
    `adaptive_reason`. A list view reads the controller's states once (context `states`), not once per rule."""

    effective_rate = serializers.SerializerMethodField()
    effective_ip_rate = serializers.SerializerMethodField()
    adaptive_factor = serializers.SerializerMethodField()
    adaptive_reason = serializers.SerializerMethodField()
    robots_delay = serializers.SerializerMethodField()

    class Meta:
        model = DomainThrottle
        fields = [
            "domain",
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
            "robots_delay",
            "effective_rate",
            "effective_ip_rate",
            "adaptive_factor",
            "adaptive_reason",
            "note",
            "updated_at",
        ]

    def _effective(self, throttle: DomainThrottle) -> dict[str, Any]:
        cache = self.context.setdefault("effective", {})
        if throttle.domain not in cache:
            state = (self.context.get("states") or {}).get(throttle.domain)
            cache[throttle.domain] = throttle_effective(throttle, state)
        return cache[throttle.domain]

    def get_effective_rate(self, throttle: DomainThrottle) -> float:
        return self._effective(throttle)["effective_rate"]

    def get_effective_ip_rate(self, throttle: DomainThrottle) -> float:
        return self._effective(throttle)["effective_ip_rate"]

    def get_adaptive_factor(self, throttle: DomainThrottle) -> float:
        return self._effective(throttle)["adaptive_factor"]

    def get_adaptive_reason(self, throttle: DomainThrottle) -> str:
        return self._effective(throttle)["adaptive_reason"]

    def get_robots_delay(self, throttle: DomainThrottle) -> float | None:
        """Seconds between requests the site's robots.txt asks for (Crawl-delay / Request-rate), as last read."""
        robots = (self.context.get("robots") or {}).get(throttle.domain)
        return (robots if robots is not None else throttle_robots(throttle))["robots_delay"]
