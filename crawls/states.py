"""The lifecycles of jobs and batches, and why a job failed. No models here: pure rules (sources.scheduling,
runtime.bridge.outcome) use these without loading Django's app registry."""

from __future__ import annotations

from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    DEAD = "dead", "Dead (worker lost)"


ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
FINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.DEAD)


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
    PACKAGE = "package", "Package environment unavailable"
    STALLED = "stalled", "Stalled (no response, no item)"
    MONITOR = "monitor", "A monitor failed the job"
    BLOCKED_TARGET = "blocked_target", "Target refused (private address)"


class BatchStatus(models.TextChoices):
    PENDING = "pending", "Pending (being launched)"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"
