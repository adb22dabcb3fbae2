"""Two jobs of one source compared item by item (`GET /api/jobs/{a}/diff/{b}/`): crawls checks they compare, items
diffs what each stored (items/history/diff.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from crawls.models import CrawlJob
from items.history.diff import jobs_diff
from items.history.volatility import source_volatile_fields
from project.errors import TrawlError


class DiffItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    fingerprint = serializers.CharField()
    url = serializers.CharField()


class DiffFieldSerializer(serializers.Serializer):
    field = serializers.CharField()
    kind = serializers.CharField(help_text="added | removed | changed")
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class ChangedItemSerializer(DiffItemSerializer):
    fields = DiffFieldSerializer(many=True)


class JobDiffSerializer(serializers.Serializer):
    a = serializers.UUIDField()
    b = serializers.UUIDField()
    added = DiffItemSerializer(many=True)
    removed = DiffItemSerializer(many=True)
    changed = ChangedItemSerializer(many=True)


def job_diff(*, first: CrawlJob, second: CrawlJob, with_volatile: bool = False) -> dict[str, Any]:
    """The items of `second` against those of `first`. Their items must be the same ones: same scraper, same
    source (or both without one), else a 400 naming `b`."""
    if first.scraper_id != second.scraper_id or first.source_id != second.source_id:
        raise TrawlError("the two jobs must be of the same source (or, without one, the same scraper)", field="b")
    volatile = set() if with_volatile else source_volatile_fields(source_id=first.source_id)
    return jobs_diff(job_a=first.pk, job_b=second.pk, volatile=volatile)
