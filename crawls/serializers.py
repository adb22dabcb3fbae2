"""API input and output shapes for jobs and items."""

from __future__ import annotations

import re

from rest_framework import serializers

from crawls.models import CrawlJob, ItemSighting
from registry.models import Variant


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo is an error instead of a silently ignored option."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


def compiles(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise serializers.ValidationError(f"{pattern!r} is not a valid regular expression: {exc}") from exc


def http_url(value: str) -> None:
    if not value.lower().startswith(("http://", "https://")):
        raise serializers.ValidationError("Only http and https URLs can be crawled or called back.")


class JobOptionsSerializer(StrictSerializer):
    """Scrapy Cluster's crawl API, plus `config` for config-driven spiders."""

    maxdepth = serializers.IntegerField(min_value=0, max_value=20, required=False)
    allowed_domains = serializers.ListField(child=serializers.CharField(max_length=253), max_length=100, required=False)
    allow_regex = serializers.ListField(
        child=serializers.CharField(max_length=500, validators=[compiles]), max_length=50, required=False
    )
    deny_regex = serializers.ListField(
        child=serializers.CharField(max_length=500, validators=[compiles]), max_length=50, required=False
    )
    deny_extensions = serializers.ListField(child=serializers.CharField(max_length=16), max_length=200, required=False)
    expires = serializers.IntegerField(min_value=0, required=False, help_text="Unix time after which to stop.")
    useragent = serializers.CharField(max_length=512, required=False)
    cookie = serializers.CharField(max_length=4096, required=False)
    attrs = serializers.DictField(required=False, help_text="Copied into every item.")
    config = serializers.DictField(required=False, help_text="Spider config, e.g. selectors.")


class JobCreateSerializer(StrictSerializer):
    url = serializers.URLField(max_length=2000, validators=[http_url])
    scraper = serializers.SlugField(max_length=100, required=False, help_text="Defaults to the built-in `link`.")
    version = serializers.CharField(max_length=64, required=False)
    variant = serializers.ChoiceField(choices=Variant.choices, required=False)
    priority = serializers.IntegerField(min_value=1, max_value=100, default=50)
    callback_url = serializers.URLField(max_length=2000, required=False, validators=[http_url])
    options = JobOptionsSerializer(required=False)


class JobSerializer(serializers.ModelSerializer):
    scraper = serializers.CharField(source="scraper.name")
    version = serializers.CharField(source="version.version", default=None)
    variant = serializers.CharField(source="version.variant", default=None)
    error = serializers.CharField(source="error_message")
    duration = serializers.FloatField(allow_null=True)
    items_url = serializers.SerializerMethodField()

    class Meta:
        model = CrawlJob
        fields = [
            "id",
            "url",
            "scraper",
            "version",
            "variant",
            "requested_version",
            "requested_variant",
            "priority",
            "status",
            "attempt",
            "worker",
            "queued_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
            "duration",
            "stats",
            "error_class",
            "error",
            "options",
            "callback_url",
            "source",
            "items_url",
        ]

    def get_items_url(self, job: CrawlJob) -> str:
        path = f"/api/jobs/{job.pk}/items/"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class JobItemSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="item.id")
    fingerprint = serializers.CharField(source="item.fingerprint")
    url = serializers.CharField(source="item.url")
    data = serializers.JSONField(source="item.data")
    first_seen = serializers.DateTimeField(source="item.first_seen")
    last_seen = serializers.DateTimeField(source="item.last_seen")
    changed_at = serializers.DateTimeField(source="item.changed_at")

    class Meta:
        model = ItemSighting
        fields = ["id", "fingerprint", "url", "change", "data", "first_seen", "last_seen", "changed_at"]
