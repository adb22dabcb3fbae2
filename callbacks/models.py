"""Webhook deliveries: one row per event sent to a caller, and one per attempt to send it."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


class EventType(models.TextChoices):
    JOB_COMPLETED = "job.completed", "job.completed"
    JOB_FAILED = "job.failed", "job.failed"
    JOB_ALERT = "job.alert", "job.alert"
    BATCH_COMPLETED = "batch.completed", "batch.completed"
    ITEM_CHANGED = "item.changed", "item.changed"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending (not tried yet)"
    FAILED = "failed", "Failed (will retry)"
    DELIVERED = "delivered", "Delivered"
    DEAD = "dead", "Dead (gave up)"


RETRYABLE_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.FAILED)


class Delivery(models.Model):
    """One event for one receiver. Its id is the event id (`X-Trawl-Delivery`), the same on every attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False, verbose_name="event id")
    event = models.CharField(max_length=20, choices=EventType.choices)
    # One event per subject ("job:<id>", "batch:<id>"): the database, not timing, keeps events from doubling.
    dedupe_key = models.CharField(max_length=100, unique=True)
    requester = models.ForeignKey(
        "access.Requester", null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    job = models.ForeignKey(
        "crawls.CrawlJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    batch = models.ForeignKey(
        "crawls.Batch", null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    target_url = models.URLField(max_length=2000)
    payload = models.JSONField()
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=8)
    next_attempt_at = models.DateTimeField(default=timezone.now, db_index=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} {self.id} [{self.status}]"


class DeliveryAttempt(models.Model):
    """What happened on one POST: the log operators read when a receiver says it never got the event."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    ok = models.BooleanField(default=False)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="unique_attempt_number")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}: {self.status_code or self.error[:40]}"
