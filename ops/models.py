"""The stored log of one job attempt (and shard), moved here from Redis when the attempt ends."""

from __future__ import annotations

from django.db import models


class JobLog(models.Model):
    job = models.ForeignKey("crawls.CrawlJob", on_delete=models.CASCADE, related_name="logs")
    attempt = models.PositiveSmallIntegerField()
    shard = models.PositiveSmallIntegerField(default=0)
    # One record a line (a multi-line record's further lines prefixed with its time, level, logger and `| `), head
    # and tail of a long log with a marker line where records were dropped.
    text = models.TextField(blank=True)
    records = models.PositiveIntegerField(default=0, help_text="Records logged, kept or not.")
    dropped = models.PositiveIntegerField(default=0)
    stored_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["job", "attempt", "shard"]
        constraints = [models.UniqueConstraint(fields=["job", "attempt", "shard"], name="unique_job_log")]

    def __str__(self) -> str:
        return f"log of {self.job_id} attempt {self.attempt} shard {self.shard}"
