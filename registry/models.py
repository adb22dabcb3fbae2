"""Scrapers (a site or job type) and the versions of code that crawl for them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MIN
from project.validators import PRIORITY_VALIDATORS
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


class PackageStatus(models.TextChoices):
    NONE = "", "Installed in the workers"
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class Package(models.Model):
    """An uploaded wheel, stored once by content (SHA-256) in the `TRAWL_PACKAGE_STORAGE` storage."""

    sha256 = models.CharField(max_length=64, unique=True)
    path = models.CharField(max_length=255, help_text="Name in the package storage: <sha256>/<wheel filename>.")
    filename = models.CharField(max_length=200)
    name = models.CharField(max_length=200, help_text="Distribution name from the wheel's METADATA.")
    dist_version = models.CharField(max_length=64)
    requires = models.JSONField(default=list, blank=True, help_text="The wheel's Requires-Dist.")
    size = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.filename} ({self.sha256[:12]})"


class StoredFile(models.Model):
    """A file of the database storage (registry.packages.storage.DatabaseStorage): the default home of uploaded
    wheels, so every host that reaches the database reaches them (at most TRAWL_PACKAGE_MAX_BYTES each)."""

    name = models.CharField(max_length=255, unique=True)
    data = models.BinaryField()
    size = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.size} bytes)"


class ScraperVersion(models.Model):
    scraper = models.ForeignKey(Scraper, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=64, validators=[validate_semver])
    variant = models.CharField(max_length=10, choices=Variant.choices, default=Variant.STABLE)
    # Importable in the workers for in-process versions (checked in clean_fields); inside its environment for a
    # packaged one (checked by the build).
    spider = models.CharField(max_length=255, help_text="Dotted path.")
    is_default = models.BooleanField(default=False)
    traffic_pct = models.PositiveSmallIntegerField(default=0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    min_priority = models.PositiveSmallIntegerField(default=PRIORITY_MIN, validators=PRIORITY_VALIDATORS)
    settings = models.JSONField(default=dict, blank=True, help_text="Scrapy settings overriding the scraper's.")
    created_at = models.DateTimeField(auto_now_add=True)
    deprecated_at = models.DateTimeField(null=True, blank=True, help_text="Deprecated versions never route.")
    rollout_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When its traffic last rose from 0; automatic rollback judges jobs since then."
    )
    rolled_back_at = models.DateTimeField(null=True, blank=True, help_text="Set when automatic rollback cut traffic.")
    rollback_reason = models.TextField(blank=True)
    package = models.ForeignKey(
        Package, null=True, blank=True, on_delete=models.PROTECT, related_name="versions", help_text="Uploaded wheel."
    )
    package_status = models.CharField(max_length=10, choices=PackageStatus.choices, default="", blank=True)
    package_log = models.TextField(blank=True, help_text="The package build's output, and why it failed.")
    # A packaged Scrapy project's spiders by their `name` ({name: dotted class path}), found by Scrapy's SpiderLoader
    # inside the package's environment when it is built: a job names one with `spider`.
    spiders = models.JSONField(default=dict, blank=True, help_text="Spider name → dotted class path (packaged).")
    settings_module = models.CharField(
        max_length=255, blank=True, help_text="The project's Scrapy settings module (scrapy.cfg [settings] default)."
    )

    class Meta:
        ordering = ["scraper__name", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["scraper", "version"], name="unique_scraper_version")]

    def __str__(self) -> str:
        return f"{self.scraper.name} {self.version} ({self.variant})"

    def clean_fields(self, exclude=None) -> None:
        errors = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        if "spider" not in (exclude or ()) and "spider" not in errors and not self.package_status:
            try:
                validate_spider_path(self.spider)
            except ValidationError as exc:
                errors["spider"] = exc.messages
        if errors:
            raise ValidationError(errors)

    @property
    def build_failure(self) -> str:
        """Why its package failed to build, in one line (`package_log` starts with the reason)."""
        return (self.package_log or "no reason recorded").splitlines()[0]

    @property
    def routable(self) -> bool:
        """In-process versions always; packaged ones once their package is built."""
        return self.package_id is None or self.package_status == PackageStatus.READY

    @property
    def is_active(self) -> bool:
        return self.deprecated_at is None

    @property
    def state(self) -> str:
        if self.deprecated_at is not None:
            return "deprecated"
        return "rolled back" if self.rolled_back_at is not None else "active"
