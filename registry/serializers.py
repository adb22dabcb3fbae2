"""API shapes for scrapers, versions, traffic and the per-version comparison."""

from __future__ import annotations

from rest_framework import serializers

from project.messaging.brokers import PRIORITY_MAX, PRIORITY_MIN
from project.web.serializers import StrictSerializer
from registry.models import Package, Scraper, ScraperVersion, Variant
from registry.monitors import monitors_valid
from registry.selectors import versions_of
from registry.services.routing import route_shares


class ScraperCreateSerializer(StrictSerializer):
    name = serializers.SlugField(max_length=100, help_text="Site key or job type, e.g. demo_shop.")
    description = serializers.CharField(allow_blank=True, required=False, default="")
    settings = serializers.DictField(
        required=False, default=dict, help_text="Scrapy settings for every version.", validators=[monitors_valid]
    )


class VersionCreateSerializer(StrictSerializer):
    version = serializers.CharField(max_length=64, help_text="Semantic version, e.g. 1.4.0.")
    variant = serializers.ChoiceField(choices=Variant.choices)
    spider = serializers.CharField(max_length=255, help_text="Dotted path to a scrapy.Spider subclass.")
    is_default = serializers.BooleanField(default=False, help_text="Takes over as the default.")
    traffic_pct = serializers.IntegerField(min_value=0, max_value=100, default=0, help_text="Share of unpinned jobs.")
    min_priority = serializers.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, default=PRIORITY_MIN)
    settings = serializers.DictField(
        required=False, default=dict, help_text="Scrapy settings overriding the scraper's.", validators=[monitors_valid]
    )


class VersionUploadSerializer(VersionCreateSerializer):
    """multipart/form-data: the same fields, `settings` as a JSON string, and the code as a wheel."""

    package = serializers.FileField(
        help_text="A Python wheel (.whl) holding the spider; its Requires-Dist are installed."
    )
    settings = serializers.JSONField(
        binary=True, required=False, default=dict, help_text="Scrapy settings overriding the scraper's, as JSON."
    )
    spider = serializers.CharField(
        max_length=255,
        help_text="Dotted path to the Spider class inside the package: the one a job that names no `spider` runs.",
    )
    settings_module = serializers.CharField(
        max_length=255,
        required=False,
        default="",
        help_text="The Scrapy project's settings module inside the package (scrapy.cfg [settings] default): its "
        "settings apply to the version's jobs beneath the version's own.",
    )

    def validate_settings(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


class PackageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Package
        fields = ["sha256", "filename", "name", "dist_version", "requires", "size", "created_at"]


class VersionSerializer(serializers.ModelSerializer):
    scraper = serializers.CharField(source="scraper.name")
    package = PackageSerializer(read_only=True, allow_null=True, help_text="The uploaded wheel; null: in-process.")

    class Meta:
        model = ScraperVersion
        fields = [
            "scraper",
            "version",
            "variant",
            "spider",
            "spiders",
            "settings_module",
            "is_default",
            "traffic_pct",
            "min_priority",
            "settings",
            "state",
            "created_at",
            "deprecated_at",
            "rollout_started_at",
            "rolled_back_at",
            "rollback_reason",
            "package",
            "package_status",
            "package_log",
        ]


class ScraperSerializer(serializers.ModelSerializer):
    versions = serializers.SerializerMethodField(help_text="Newest first, by semantic version.")
    traffic = serializers.SerializerMethodField(help_text="Active versions' traffic_pct.")
    effective_share = serializers.SerializerMethodField(
        help_text="Percent of unpinned jobs each active version takes: its traffic_pct, and the default takes what "
        "the others leave."
    )

    class Meta:
        model = Scraper
        fields = ["name", "description", "settings", "created_at", "traffic", "effective_share", "versions"]

    def _versions(self, scraper: Scraper) -> list[ScraperVersion]:
        if not hasattr(scraper, "_sorted_versions"):
            scraper._sorted_versions = versions_of(scraper=scraper)
        return scraper._sorted_versions

    def get_versions(self, scraper: Scraper) -> list[dict]:
        return VersionSerializer(self._versions(scraper), many=True).data

    def get_traffic(self, scraper: Scraper) -> dict[str, int]:
        return {v.version: v.traffic_pct for v in self._versions(scraper) if v.is_active}

    def get_effective_share(self, scraper: Scraper) -> dict[str, float]:
        return route_shares(self._versions(scraper))


# `{"<version>": percent, ...}`: the whole split of a scraper's active versions.
TRAFFIC_SCHEMA = {
    "type": "object",
    "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100},
    "example": {"1.0.0": 90, "1.1.0": 10},
}


class OutcomeSerializer(serializers.Serializer):
    version = serializers.CharField()
    variant = serializers.CharField()
    state = serializers.CharField()
    traffic_pct = serializers.IntegerField()
    is_default = serializers.BooleanField()
    jobs = serializers.IntegerField(help_text="Ended jobs: succeeded, failed and dead (cancelled apart).")
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True)
    items_per_job = serializers.FloatField(allow_null=True)
    median_duration = serializers.FloatField(allow_null=True, help_text="Seconds.")
    error_classes = serializers.DictField(child=serializers.IntegerField())
    rollback_reason = serializers.CharField()
