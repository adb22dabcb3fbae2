"""Crawl jobs and the batches they are submitted in."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from crawls.states import ACTIVE_STATUSES, FINAL_STATUSES, BatchStatus, ErrorClass, JobStatus  # noqa: F401
from project.messaging.brokers import PRIORITY_DEFAULT
from project.validators import PARALLELISM_VALIDATORS, PRIORITY_VALIDATORS


class Batch(models.Model):
    """Many jobs submitted together; one `batch.completed` callback when every one has ended."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requester = models.ForeignKey(
        "access.Requester", null=True, blank=True, on_delete=models.SET_NULL, related_name="batches"
    )
    name = models.CharField(max_length=200, blank=True)
    priority = models.PositiveSmallIntegerField(default=PRIORITY_DEFAULT, validators=PRIORITY_VALIDATORS)
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


SPIDER_NAME_MAX = 100


class CrawlJob(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey("sources.Source", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    # Blank when a named spider starts from its own start_urls.
    url = models.URLField(max_length=2000, blank=True)
    scraper = models.ForeignKey("registry.Scraper", on_delete=models.PROTECT, related_name="jobs")
    # A spider of the version by its Scrapy `name` (ScraperVersion.spiders); blank: the version's own spider.
    spider = models.CharField(max_length=SPIDER_NAME_MAX, blank=True)
    requested_version = models.CharField(max_length=64, blank=True)
    requested_variant = models.CharField(max_length=10, blank=True)
    version = models.ForeignKey(
        "registry.ScraperVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    requester = models.ForeignKey(
        "access.Requester", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    priority = models.PositiveSmallIntegerField(default=PRIORITY_DEFAULT, validators=PRIORITY_VALIDATORS)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    # Shard tasks sharing the job's frontier (crawls.services.shards); 1 runs the crawl in one process.
    parallelism = models.PositiveSmallIntegerField(default=1, validators=PARALLELISM_VALIDATORS)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    worker = models.CharField(max_length=255, blank=True)
    queued_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When a cancel was asked: a running crawl stops within about a second of it (or keeps its outcome if it ended).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    stats = models.JSONField(default=dict, blank=True)
    error_class = models.CharField(max_length=20, choices=ErrorClass.choices, blank=True)
    error_message = models.TextField(blank=True)
    options = models.JSONField(default=dict, blank=True)
    # Spider arguments (strings), the spider's keyword arguments as scrapyd passes them (runtime/inputs/args.py).
    args = models.JSONField(default=dict, blank=True)
    callback_url = models.URLField(max_length=2000, blank=True)
    # Monitor breaches found when the job ended: [{"monitor", "expected", "actual"}] (registry.monitors).
    alerts = models.JSONField(default=list, blank=True)

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


class JobScreenshot(models.Model):
    """A rendered page as Chromium showed it (JPEG, the viewport): taken when a page failed, or for the first pages
    of a job that asked (docs/rendering.md). Bounded per job; deleted with the job."""

    class Reason(models.TextChoices):
        FAILURE = "failure", "the page failed"
        ASKED = "asked", "one of the first pages, as asked"

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="screenshots")
    url = models.URLField(max_length=2000)
    reason = models.CharField(max_length=10, choices=Reason.choices)
    image = models.BinaryField()
    taken_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "taken_at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id} {self.reason} {self.url}"


class JobErrorPage(models.Model):
    """A response that made the job's spider raise, its body's first TRAWL_ERROR_PAGE_MAX_BYTES
    (runtime/watch/error_pages.py). At most TRAWL_ERROR_PAGES_MAX per job; deleted with the job."""

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="error_pages")
    number = models.PositiveIntegerField(help_text="attempt × 1000 + its order in the attempt; named in the log")
    url = models.URLField(max_length=2000)
    status = models.PositiveSmallIntegerField()
    content_type = models.CharField(max_length=200, blank=True)
    body = models.BinaryField()
    size = models.PositiveBigIntegerField(help_text="the whole body's bytes")
    error = models.TextField(blank=True)
    kept_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="unique_error_page_per_job")]

    def __str__(self) -> str:
        return f"{self.job_id} #{self.number} {self.url}"


class JobRecording(models.Model):
    """A recorded job's responses (gzipped WARC) and the items it kept, one per shard (runtime/replay/record.py):
    bounded by TRAWL_RECORD_MAX_BYTES / TRAWL_RECORD_MAX_ITEMS; deleted with the job."""

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="recordings")
    shard = models.PositiveSmallIntegerField(default=0)
    warc = models.BinaryField()
    responses = models.PositiveIntegerField(default=0)
    items = models.JSONField(default=list)
    truncated = models.BooleanField(default=False, help_text="a bound was reached: later responses were not kept")
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "shard"], name="unique_recording_per_shard")]

    def __str__(self) -> str:
        return f"{self.job_id} shard {self.shard}: {self.responses} responses"


class JobReplay(models.Model):
    """A version run against a recorded job's responses with no network, and how its items differ
    (crawls/replays/runs.py)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        CLEAN = "clean", "clean: no difference"
        DIFFERENT = "different", "items differ"
        FAILED = "failed", "failed (network, error)"

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="replays")
    version = models.ForeignKey("registry.ScraperVersion", on_delete=models.CASCADE, related_name="replays")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.job_id}: {self.status}"


class JobLog(models.Model):
    """The stored log of one job attempt (and shard), moved here from Redis when the attempt ends
    (crawls/logs/joblog.py).

    Its table keeps the name it had when the model lived in ops (`ops_joblog`): the move changed no row."""

    job = models.ForeignKey(CrawlJob, on_delete=models.CASCADE, related_name="logs")
    attempt = models.PositiveSmallIntegerField()
    shard = models.PositiveSmallIntegerField(default=0)
    # One record a line (a multi-line record's further lines prefixed with its time, level, logger and `| `), head
    # and tail of a long log with a marker line where records were dropped.
    text = models.TextField(blank=True)
    records = models.PositiveIntegerField(default=0, help_text="Records logged, kept or not.")
    dropped = models.PositiveIntegerField(default=0)
    stored_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ops_joblog"
        ordering = ["job", "attempt", "shard"]
        constraints = [models.UniqueConstraint(fields=["job", "attempt", "shard"], name="unique_job_log")]

    def __str__(self) -> str:
        return f"log of {self.job_id} attempt {self.attempt} shard {self.shard}"
