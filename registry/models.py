"""Scrapers (a site or job type) and the versions of code that crawl for them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from project.errors import TrawlError
from registry.semver import is_semver
from registry.spiders import spider_load


class Scraper(models.Model):
    name = models.SlugField(max_length=100, unique=True, help_text="Site key or job type, e.g. demo_shop, link.")
    description = models.TextField(blank=True)
    settings = models.JSONField(default=dict, blank=True, help_text="Scrapy settings for every version.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Variant(models.TextChoices):
    STABLE = "stable", "Stable"
    BETA = "beta", "Beta"
    CANARY = "canary", "Canary"


def validate_semver(value: str) -> None:
    if not is_semver(value):
        raise ValidationError(f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.0)")


def validate_spider_path(value: str) -> None:
    try:
        spider_load(value)
    except TrawlError as exc:
        raise ValidationError(exc.message) from exc


class ScraperVersion(models.Model):
    scraper = models.ForeignKey(Scraper, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=64, validators=[validate_semver])
    variant = models.CharField(max_length=10, choices=Variant.choices, default=Variant.STABLE)
    spider = models.CharField(max_length=255, validators=[validate_spider_path], help_text="Dotted path.")
    is_default = models.BooleanField(default=False)
    traffic_pct = models.PositiveSmallIntegerField(default=0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    min_priority = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    settings = models.JSONField(default=dict, blank=True, help_text="Scrapy settings overriding the scraper's.")
    created_at = models.DateTimeField(auto_now_add=True)
    deprecated_at = models.DateTimeField(null=True, blank=True, help_text="Deprecated versions never route.")
    rollout_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When its traffic last rose from 0; automatic rollback judges jobs since then."
    )
    rolled_back_at = models.DateTimeField(null=True, blank=True, help_text="Set when automatic rollback cut traffic.")
    rollback_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["scraper__name", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["scraper", "version"], name="unique_scraper_version")]

    def __str__(self) -> str:
        return f"{self.scraper.name} {self.version} ({self.variant})"

    @property
    def is_active(self) -> bool:
        return self.deprecated_at is None

    @property
    def state(self) -> str:
        if self.deprecated_at is not None:
            return "deprecated"
        return "rolled back" if self.rolled_back_at is not None else "active"
