"""API shapes of replays: asking for one, and one as the API shows it."""

from __future__ import annotations

from rest_framework import serializers

from crawls.models import JobReplay
from project.web.serializers import StrictSerializer


class ReplayCreateSerializer(StrictSerializer):
    version = serializers.CharField(max_length=64, help_text="The version of the job's scraper to replay with.")


class JobReplaySerializer(serializers.ModelSerializer):
    job = serializers.CharField(source="job_id")
    version = serializers.CharField(source="version.version")

    class Meta:
        model = JobReplay
        fields = ("id", "job", "version", "status", "error", "report", "created_at", "finished_at")
