"""The lifecycles of jobs and batches, and why a job failed (ErrorClass, the runtime's: it gives most of them). No
models here: pure rules (sources.scheduling) use these without loading Django's app registry."""

from __future__ import annotations

from django.db import models

from runtime.bridge.outcome import ErrorClass

__all__ = ("ACTIVE_STATUSES", "FINAL_STATUSES", "BatchStatus", "ErrorClass", "JobStatus")


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    DEAD = "dead", "Dead (worker lost)"


ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
FINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.DEAD)


class BatchStatus(models.TextChoices):
    PENDING = "pending", "Pending (being launched)"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    CANCELLED = "cancelled", "Cancelled"
