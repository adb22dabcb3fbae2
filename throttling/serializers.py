"""API input and output shapes for throttle rules."""

from __future__ import annotations

from rest_framework import serializers

from project.errors import TrawlError
from project.serializers import StrictSerializer
from throttling.models import DomainThrottle
from throttling.services import domain_normalize


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
    note = serializers.CharField(allow_blank=True, max_length=2000, required=False)


class ThrottleCreateSerializer(ThrottleInputSerializer):
    domain = serializers.CharField(max_length=253, validators=[host_name], help_text="Registered domain or exact host.")


class ThrottleSerializer(serializers.ModelSerializer):
    class Meta:
        model = DomainThrottle
        fields = ["domain", "rate", "burst", "ip_rate", "ip_burst", "scale", "blocked", "note", "updated_at"]
