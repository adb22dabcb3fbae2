"""Run history: jobs as runs (pages, items, error rate, duration, outcome) and deltas against the previous run of the
same source. A source's list of runs is sources.selectors.source_runs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from crawls.models import CrawlJob
from crawls.selectors import job_previous_run
from crawls.serializers import JobSerializer
from registry.monitors import error_rate

RUN_NUMBERS = ("pages", "items", "items_new", "items_changed", "items_unchanged", "items_invalid")
DELTA_NUMBERS = (*RUN_NUMBERS, "error_rate", "duration")


def run_numbers(job: CrawlJob) -> dict[str, Any]:
    stats = job.stats or {}
    numbers: dict[str, Any] = {name: int(stats.get(name, 0) or 0) for name in RUN_NUMBERS}
    numbers["error_rate"] = error_rate(stats)
    numbers["duration"] = round(job.duration, 3) if job.duration is not None else None
    return numbers


def run_deltas(job: CrawlJob) -> dict[str, Any] | None:
    """This run's numbers minus the previous run's (None where either is unknown); None for a job without one."""
    previous = job_previous_run(job=job)
    if previous is None:
        return None
    now, before = run_numbers(job), run_numbers(previous)
    deltas: dict[str, Any] = {"previous_job": str(previous.pk), "previous_status": previous.status}
    for name in DELTA_NUMBERS:
        a, b = now[name], before[name]
        deltas[name] = None if a is None or b is None else round(a - b, 4)
    return deltas


class RunSerializer(serializers.ModelSerializer):
    """One run of a source. Numbers missing from an old job's stats read as 0."""

    pages = serializers.IntegerField(source="stats.pages", default=0, read_only=True)
    items = serializers.IntegerField(source="stats.items", default=0, read_only=True)
    items_new = serializers.IntegerField(source="stats.items_new", default=0, read_only=True)
    items_changed = serializers.IntegerField(source="stats.items_changed", default=0, read_only=True)
    items_unchanged = serializers.IntegerField(source="stats.items_unchanged", default=0, read_only=True)
    items_invalid = serializers.IntegerField(source="stats.items_invalid", default=0, read_only=True)
    error_rate = serializers.SerializerMethodField()
    duration = serializers.FloatField(allow_null=True, read_only=True)
    error = serializers.CharField(source="error_message", read_only=True)

    class Meta:
        model = CrawlJob
        fields = [
            "id",
            "status",
            "error_class",
            "error",
            "queued_at",
            "started_at",
            "finished_at",
            "duration",
            *RUN_NUMBERS,
            "error_rate",
            "alerts",
        ]

    def get_error_rate(self, job: CrawlJob) -> float | None:
        return error_rate(job.stats or {})


class JobDetailSerializer(JobSerializer):
    """A job as `GET /api/jobs/{id}/` shows it: for a source's job, also `deltas` against its previous run."""

    deltas = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "deltas"]

    def get_deltas(self, job: CrawlJob) -> dict[str, Any] | None:
        return run_deltas(job)
