"""API input and output shapes for batches."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from crawls.models import Batch, CrawlJob
from crawls.selectors import batch_totals
from crawls.serializers.jobs import JobCreateSerializer
from project.messaging.brokers import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN
from project.web.serializers import StrictSerializer, http_url


class BatchJobSpecSerializer(JobCreateSerializer):
    priority = serializers.IntegerField(
        min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, required=False, help_text="Defaults to the batch's priority."
    )


class BatchCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    priority = serializers.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, default=PRIORITY_DEFAULT)
    callback_url = serializers.URLField(
        max_length=2000, required=False, validators=[http_url], help_text="Receives one `batch.completed`."
    )
    jobs = serializers.ListField(child=BatchJobSpecSerializer(), allow_empty=False)

    def validate_jobs(self, jobs: list) -> list:
        limit = settings.TRAWL_BATCH_MAX_JOBS
        if len(jobs) > limit:
            raise serializers.ValidationError(f"A batch holds at most {limit} jobs, got {len(jobs)}.")
        return jobs

    def to_internal_value(self, data):
        # Refuse an oversized batch before validating thousands of specs one by one.
        if isinstance(data, dict) and isinstance(data.get("jobs"), list):
            try:
                self.validate_jobs(data["jobs"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"jobs": exc.detail}) from exc
        return super().to_internal_value(data)


class BatchCreatedSerializer(serializers.ModelSerializer):
    class Meta:
        model = Batch
        fields = ["id", "total", "status"]


class BatchSerializer(serializers.ModelSerializer):
    totals = serializers.SerializerMethodField(help_text="Jobs by status; live while the batch runs.")
    done = serializers.SerializerMethodField(help_text="Jobs that have ended.")

    class Meta:
        model = Batch
        fields = [
            "id",
            "name",
            "priority",
            "status",
            "total",
            "done",
            "totals",
            "callback_url",
            "created_at",
            "finished_at",
        ]

    def get_totals(self, batch: Batch) -> dict[str, int]:
        return batch_totals(batch)

    def get_done(self, batch: Batch) -> int:
        totals = batch_totals(batch)
        return sum(count for status, count in totals.items() if status not in ("queued", "running"))


class BatchJobSerializer(serializers.ModelSerializer):
    error = serializers.CharField(source="error_message")

    class Meta:
        model = CrawlJob
        fields = ["id", "url", "status", "attempt", "parallelism", "error_class", "error", "started_at", "finished_at"]


class BatchDetailSerializer(BatchSerializer):
    jobs = BatchJobSerializer(many=True, read_only=True)

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "jobs"]
