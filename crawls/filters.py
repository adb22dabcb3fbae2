"""The query parameters of the job and batch lists: what each filters on (crawls.selectors applies them)."""

from __future__ import annotations

from rest_framework import serializers

from crawls.models import BatchStatus, ErrorClass, JobStatus
from project.web.query import MomentField, QueryParams, row_id_field


class JobFilters(QueryParams):
    scraper = serializers.CharField(help_text="The scraper's name.")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    error_class = serializers.ChoiceField(choices=ErrorClass.choices)
    source = row_id_field(help_text="Runs of this source.")
    batch = serializers.UUIDField(help_text="Jobs of this batch.")
    queued_since = MomentField(help_text="Queued at or after this time (ISO 8601).")
    queued_before = MomentField(help_text="Queued before this time.")
    finished_since = MomentField(help_text="Ended at or after this time.")
    finished_before = MomentField(help_text="Ended before this time.")


class BatchFilters(QueryParams):
    status = serializers.ChoiceField(choices=BatchStatus.choices)
    created_since = MomentField(help_text="Created at or after this time (ISO 8601).")
    created_before = MomentField(help_text="Created before this time.")
    finished_since = MomentField(help_text="Ended at or after this time.")
    finished_before = MomentField(help_text="Ended before this time.")


class DiffFilters(QueryParams):
    volatile = serializers.BooleanField(default=False, help_text="true: also compare the source's volatile fields.")
