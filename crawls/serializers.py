"""API input and output shapes for jobs, items and batches."""

from __future__ import annotations

import re

from django.conf import settings
from rest_framework import serializers

from crawls.models import Batch, CrawlJob, DomainThrottle, ItemSighting, Source, SourceKind, SourceStrategy
from crawls.selectors import batch_totals
from crawls.services.throttles import domain_normalize
from project.errors import TrawlError
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


class BatchJobSpecSerializer(JobCreateSerializer):
    priority = serializers.IntegerField(
        min_value=1, max_value=100, required=False, help_text="Defaults to the batch's priority."
    )


class BatchCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    priority = serializers.IntegerField(min_value=1, max_value=100, default=50)
    callback_url = serializers.URLField(
        max_length=2000, required=False, validators=[http_url], help_text="Receives one `batch.completed`."
    )
    jobs = serializers.ListField(child=BatchJobSpecSerializer(), allow_empty=False)

    def validate_jobs(self, jobs: list) -> list:
        limit = settings.TRAWL_BATCH_MAX_JOBS
        if len(jobs) > limit:
            raise serializers.ValidationError(f"A batch holds at most {limit} jobs, got {len(jobs)}.")
        return jobs

    def to_internal_value(self, data):
        # Refuse an oversized batch before validating thousands of specs one by one.
        if isinstance(data, dict) and isinstance(data.get("jobs"), list):
            try:
                self.validate_jobs(data["jobs"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"jobs": exc.detail}) from exc
        return super().to_internal_value(data)


class BatchCreatedSerializer(serializers.ModelSerializer):
    class Meta:
        model = Batch
        fields = ["id", "total", "status"]


class BatchSerializer(serializers.ModelSerializer):
    totals = serializers.SerializerMethodField(help_text="Jobs by status; live while the batch runs.")
    done = serializers.SerializerMethodField(help_text="Jobs that have ended.")

    class Meta:
        model = Batch
        fields = [
            "id",
            "name",
            "priority",
            "status",
            "total",
            "done",
            "totals",
            "callback_url",
            "created_at",
            "finished_at",
        ]

    def get_totals(self, batch: Batch) -> dict[str, int]:
        return batch_totals(batch)

    def get_done(self, batch: Batch) -> int:
        totals = batch_totals(batch)
        return sum(count for status, count in totals.items() if status not in ("queued", "running"))


class BatchJobSerializer(serializers.ModelSerializer):
    error = serializers.CharField(source="error_message")

    class Meta:
        model = CrawlJob
        fields = ["id", "url", "status", "attempt", "error_class", "error", "started_at", "finished_at"]


class BatchDetailSerializer(BatchSerializer):
    jobs = BatchJobSerializer(many=True, read_only=True)

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "jobs"]


# --- Throttles -------------------------------------------------------------------------------------


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


# --- Sources ---------------------------------------------------------------------------------------


class SourceInputSerializer(StrictSerializer):
    """A source as PATCH takes it: any of these fields. The service checks what depends on several of them."""

    url = serializers.URLField(max_length=2000, required=False, validators=[http_url])
    kind = serializers.ChoiceField(choices=SourceKind.choices, required=False)
    strategy = serializers.ChoiceField(
        choices=SourceStrategy.choices, required=False, help_text="Defaults to `discovery` for a sitemap, else `deep`."
    )
    scraper = serializers.SlugField(
        max_length=100, required=False, help_text="Defaults to `sitemap` for a sitemap, else `link`."
    )
    priority = serializers.IntegerField(min_value=1, max_value=100, required=False)
    refresh_interval = serializers.IntegerField(
        min_value=1, required=False, help_text="Base seconds between crawls; the interval then adapts within min..max."
    )
    min_interval = serializers.IntegerField(min_value=1, required=False)
    max_interval = serializers.IntegerField(min_value=1, required=False)
    config = serializers.DictField(
        required=False, help_text="Spider config (selectors, cookies, proxy_group...); `children` shapes what it finds."
    )
    enabled = serializers.BooleanField(required=False)
    window_start_hour = serializers.IntegerField(
        min_value=0, max_value=23, allow_null=True, required=False, help_text="Crawls start from this local hour..."
    )
    window_end_hour = serializers.IntegerField(
        min_value=0, max_value=23, allow_null=True, required=False, help_text="...until before this one; 22 → 6: night"
    )
    timezone = serializers.CharField(max_length=64, required=False, help_text="IANA name of the window's timezone.")
    next_sync_at = serializers.DateTimeField(required=False, help_text="When it runs next; a past time means now.")


class SourceCreateSerializer(SourceInputSerializer):
    url = serializers.URLField(max_length=2000, validators=[http_url])
    kind = serializers.ChoiceField(choices=SourceKind.choices, default=SourceKind.LIST)


class SourceSerializer(serializers.ModelSerializer):
    scraper = serializers.CharField(source="scraper.name")

    class Meta:
        model = Source
        fields = [
            "id",
            "url",
            "kind",
            "strategy",
            "scraper",
            "priority",
            "enabled",
            "next_sync_at",
            "schedule_note",
            "refresh_interval",
            "min_interval",
            "max_interval",
            "current_interval",
            "consecutive_failures",
            "window_start_hour",
            "window_end_hour",
            "timezone",
            "config",
            "last_run_at",
            "last_stats",
            "parent",
            "created_at",
            "updated_at",
        ]


class PriceChangeSerializer(serializers.Serializer):
    old_price = serializers.CharField()
    old_currency = serializers.CharField()
    new_price = serializers.CharField()
    new_currency = serializers.CharField()
    changed_at = serializers.DateTimeField()
    job = serializers.UUIDField(source="job_id", allow_null=True)


class ItemSerializer(serializers.Serializer):
    """An item with its latest price changes, newest first (GET /api/items/)."""

    id = serializers.IntegerField()
    scraper = serializers.CharField(source="scraper.name")
    fingerprint = serializers.CharField()
    url = serializers.CharField()
    data = serializers.JSONField()
    category = serializers.CharField(source="category.name", allow_null=True, default=None)
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    changed_at = serializers.DateTimeField()
    price_history = PriceChangeSerializer(source="price_changes.all", many=True)
