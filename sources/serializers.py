"""API input and output shapes for sources."""

from __future__ import annotations

from rest_framework import serializers

from crawls.serializers import spider_args_field
from project.messaging.brokers import PRIORITY_MAX, PRIORITY_MIN
from project.web.serializers import StrictSerializer, http_url
from registry.monitors import monitors_valid
from sources.models import Source, SourceKind, SourceStrategy


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
    priority = serializers.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, required=False)
    refresh_interval = serializers.IntegerField(
        min_value=1, required=False, help_text="Base seconds between crawls; the interval then adapts within min..max."
    )
    min_interval = serializers.IntegerField(min_value=1, required=False)
    max_interval = serializers.IntegerField(min_value=1, required=False)
    config = serializers.DictField(
        required=False,
        help_text="Spider config (selectors, cookies, proxy_group...); `children` shapes what it finds.",
        validators=[monitors_valid],  # TRAWL_MONITORS of the source (docs/operations.md)
    )
    args = spider_args_field()
    enabled = serializers.BooleanField(required=False)
    window_start_hour = serializers.IntegerField(
        min_value=0, max_value=23, allow_null=True, required=False, help_text="Crawls start from this local hour..."
    )
    window_end_hour = serializers.IntegerField(
        min_value=0, max_value=23, allow_null=True, required=False, help_text="...until before this one; 22 → 6: night"
    )
    timezone = serializers.CharField(
        max_length=64, required=False, help_text="IANA name of the window's (and the cron's) timezone."
    )
    cron = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="Run at these minutes in `timezone` instead of on an adaptive interval ('*/15 * * * *', "
        "'0 6 * * mon-fri'); empty: adaptive.",
    )
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
            "cron",
            "config",
            "args",
            "last_run_at",
            "last_stats",
            "parent",
            "created_at",
            "updated_at",
        ]


FIELD_NAMES_MAX = 100


def field_names() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=500), max_length=FIELD_NAMES_MAX, required=False, default=list
    )


class VolatileOverrideSerializer(serializers.Serializer):
    always = field_names()
    never = field_names()


class VolatileFieldsSerializer(serializers.Serializer):
    """A source's volatile fields (items/history/volatility.py)."""

    observed = serializers.ListField(child=serializers.CharField(), help_text="What its last runs found volatile.")
    always = serializers.ListField(child=serializers.CharField())
    never = serializers.ListField(child=serializers.CharField())
    effective = serializers.ListField(child=serializers.CharField(), help_text="(observed + always) - never")
    runs = serializers.JSONField(help_text='The last runs\' tallies: [{"job", "seen", "changed": {field: items}}].')
