"""Sources to crawl, crawl jobs, and the items they found."""

from __future__ import annotations

import uuid
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

PRIORITY_VALIDATORS = [MinValueValidator(1), MaxValueValidator(100)]


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
    priority = models.PositiveSmallIntegerField(default=50, validators=PRIORITY_VALIDATORS)
    refresh_interval = models.PositiveIntegerField(default=3600, help_text="Base seconds between crawls.")
    min_interval = models.PositiveIntegerField(default=600)
    max_interval = models.PositiveIntegerField(default=86400)
    current_interval = models.PositiveIntegerField(default=3600)
    next_sync_at = models.DateTimeField(default=timezone.now, db_index=True)
    config = models.JSONField(default=dict, blank=True, help_text="Cookies, headers, selectors, proxy group...")
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
        ordering = ["next_sync_at"]
        constraints = [models.UniqueConstraint(fields=["scraper", "url"], name="unique_source_per_scraper")]

    def __str__(self) -> str:
        return f"{self.kind} {self.url}"


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    DEAD = "dead", "Dead (worker lost)"


ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)


class ErrorClass(models.TextChoices):
    TIMEOUT = "timeout", "Timeout"
    DNS = "dns", "DNS lookup failed"
    CONNECTION = "connection", "Connection failed"
    HTTP_4XX = "http_4xx", "HTTP 4xx"
    HTTP_5XX = "http_5xx", "HTTP 5xx"
    BLOCKED = "blocked", "Blocked"
    PARSE = "parse", "Parse"
    SPIDER_ERROR = "spider_error", "Spider error"
    WORKER_LOST = "worker_lost", "Worker lost"
    CANCELLED = "cancelled", "Cancelled"
    ROUTING = "routing", "No scraper version to run"


class BatchStatus(models.TextChoices):
    PENDING = "pending", "Pending (being launched)"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"


class Batch(models.Model):
    """Many jobs submitted together; one `batch.completed` callback when every one has ended."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requester = models.ForeignKey(
        "access.Requester", null=True, blank=True, on_delete=models.SET_NULL, related_name="batches"
    )
    name = models.CharField(max_length=200, blank=True)
    priority = models.PositiveSmallIntegerField(default=50, validators=PRIORITY_VALIDATORS)
    callback_url = models.URLField(max_length=2000, blank=True)
    status = models.CharField(max_length=10, choices=BatchStatus.choices, default=BatchStatus.PENDING, db_index=True)
    total = models.PositiveIntegerField(default=0)
    totals = models.JSONField(default=dict, blank=True, help_text="Jobs by final status.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return f"{self.name or self.id} [{self.status}]"


class CrawlJob(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(Source, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    url = models.URLField(max_length=2000)
    scraper = models.ForeignKey("registry.Scraper", on_delete=models.PROTECT, related_name="jobs")
    requested_version = models.CharField(max_length=64, blank=True)
    requested_variant = models.CharField(max_length=10, blank=True)
    version = models.ForeignKey(
        "registry.ScraperVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    requester = models.ForeignKey(
        "access.Requester", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    priority = models.PositiveSmallIntegerField(default=50, validators=PRIORITY_VALIDATORS)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    worker = models.CharField(max_length=255, blank=True)
    queued_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    error_class = models.CharField(max_length=20, choices=ErrorClass.choices, blank=True)
    error_message = models.TextField(blank=True)
    options = models.JSONField(default=dict, blank=True)
    callback_url = models.URLField(max_length=2000, blank=True)

    class Meta:
        ordering = ["-queued_at"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="job_status_heartbeat"),
            models.Index(fields=["requester", "queued_at"], name="job_requester_queued"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.url} [{self.status}]"

    @property
    def duration(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Item(models.Model):
    """One thing a scraper found, upserted by fingerprint so re-crawls update instead of duplicating."""

    scraper = models.ForeignKey("registry.Scraper", on_delete=models.CASCADE, related_name="items")
    fingerprint = models.CharField(max_length=64)
    url = models.URLField(max_length=2000, blank=True)
    data = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    changed_at = models.DateTimeField(default=timezone.now)
    last_job = models.ForeignKey(CrawlJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Our category, when the item's external `category` is mapped (catalog.CategoryMap).
    category = models.ForeignKey(
        "catalog.Category", null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )

    class Meta:
        ordering = ["-last_seen"]
        constraints = [models.UniqueConstraint(fields=["scraper", "fingerprint"], name="unique_item_per_scraper")]

    def __str__(self) -> str:
        return self.data.get("title") or self.url or self.fingerprint


class ItemChange(models.TextChoices):
    NEW = "new", "New"
    CHANGED = "changed", "Changed"
    UNCHANGED = "unchanged", "Unchanged"


class ItemSighting(models.Model):
    """That a job saw an item, and whether it was new, changed or unchanged then."""

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="sightings")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="sightings")
    change = models.CharField(max_length=10, choices=ItemChange.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "item"], name="unique_sighting")]

    def __str__(self) -> str:
        return f"{self.job_id} saw {self.item_id} ({self.change})"


class ItemPriceChange(models.Model):
    """An item's price moved: from what to what, seen by which job. The latest few are kept per item."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="price_changes")
    job = models.ForeignKey(CrawlJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    old_price = models.CharField(max_length=40, blank=True)
    old_currency = models.CharField(max_length=3, blank=True)
    new_price = models.CharField(max_length=40, blank=True)
    new_currency = models.CharField(max_length=3, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-pk"]
        indexes = [models.Index(fields=["item", "-changed_at"], name="price_change_item_recent")]

    def __str__(self) -> str:
        return f"{self.old_price} {self.old_currency} → {self.new_price} {self.new_currency}"


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
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
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
        ordering = ["egress_label"]
        verbose_name_plural = "proxies"

    def __str__(self) -> str:
        return f"{self.egress_label} ({self.url.rsplit('@', 1)[-1]})"
