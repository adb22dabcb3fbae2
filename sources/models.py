"""Sources: URLs crawled on a schedule that adapts to how often they change."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils import timezone

from project.messaging.brokers import PRIORITY_DEFAULT
from project.validators import PRIORITY_VALIDATORS


def validate_timezone(value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"{value!r} is not an IANA timezone, e.g. Europe/Paris or UTC") from exc


class SourceKind(models.TextChoices):
    HUB = "hub", "Hub (category links)"
    LIST = "list", "List (paginated items)"
    PRODUCT = "product", "Product (one item)"
    SITEMAP = "sitemap", "Sitemap"


class SourceStrategy(models.TextChoices):
    DEEP = "deep", "Deep (follow pagination, yield items)"
    DISCOVERY = "discovery", "Discovery (find new sources)"


class Source(models.Model):
    url = models.URLField(max_length=2000)
    kind = models.CharField(max_length=10, choices=SourceKind.choices, default=SourceKind.LIST)
    strategy = models.CharField(max_length=10, choices=SourceStrategy.choices, default=SourceStrategy.DEEP)
    scraper = models.ForeignKey("registry.Scraper", on_delete=models.PROTECT, related_name="sources")
    priority = models.PositiveSmallIntegerField(default=PRIORITY_DEFAULT, validators=PRIORITY_VALIDATORS)
    refresh_interval = models.PositiveIntegerField(default=3600, help_text="Base seconds between crawls.")
    min_interval = models.PositiveIntegerField(default=600)
    max_interval = models.PositiveIntegerField(default=86400)
    current_interval = models.PositiveIntegerField(default=3600)
    next_sync_at = models.DateTimeField(default=timezone.now, db_index=True)
    config = models.JSONField(default=dict, blank=True, help_text="Cookies, headers, selectors, proxy group...")
    args = models.JSONField(
        default=dict, blank=True, help_text="Spider arguments (strings) every job of the source passes."
    )
    enabled = models.BooleanField(default=True)
    window_start_hour = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(23)], help_text="Crawls start from this hour (local)..."
    )
    window_end_hour = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(23)],
        help_text="...until before this one; 22 → 6 is night.",
    )
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_timezone])
    cron = models.CharField(
        max_length=100,
        blank=True,
        help_text="Run at these minutes in the source's timezone instead of on an adaptive interval: "
        "'*/15 * * * *', '0 6 * * mon-fri' (minute hour day month weekday).",
    )
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_stats = models.JSONField(default=dict, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True, help_text="When its last job ended.")
    schedule_note = models.CharField(max_length=300, blank=True, help_text="Why the next run is when it is.")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The hub or sitemap that discovered it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "crawls_source"  # created by the crawls app before it was split; the table keeps its name
        ordering = ["next_sync_at"]
        constraints = [models.UniqueConstraint(fields=["scraper", "url"], name="unique_source_per_scraper")]
        indexes = [
            # A dispatch pass's order (sources.services.dispatch): its chunks walk this instead of sorting every due
            # source each time.
            models.Index(
                models.F("priority").desc(),
                "next_sync_at",
                "id",
                name="source_dispatch_order",
                condition=models.Q(enabled=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.url}"
