"""REST API for items: what changed since when, with price history; streaming a job's items as JSON lines or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, renderers, viewsets
from rest_framework.request import Request

from access.models import Requester
from items.models import Item, ItemSighting
from items.serializers import ItemSerializer
from project.errors import TrawlError

if TYPE_CHECKING:
    from crawls.models import CrawlJob  # annotations only: items sits below crawls

EXPORT_COLUMNS = ("id", "fingerprint", "url", "change", "first_seen", "last_seen", "changed_at")
EXPORT_CHUNK = 500


def items_visible(*, requester: Requester) -> QuerySet[Item]:
    """Admins see every item; a requester its own (those its jobs produced: access.tenancy)."""
    items = Item.objects.select_related("scraper", "category").prefetch_related("price_changes")
    if not requester.is_admin:
        items = items.filter(tenant=requester)
    return items.order_by("-changed_at", "-pk")


class ItemViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = ItemSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "changed_since", OpenApiTypes.DATETIME, description="Only items whose content changed at or after it."
            )
        ]
    )
    def list(self, request: Request, *args, **kwargs):
        """Items you can see (those your jobs saw; admins: all), most recently changed first, with price history."""
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Item]:
        items = items_visible(requester=self.request.user)
        since = self.request.query_params.get("changed_since")
        if since:
            items = items.filter(changed_at__gte=changed_since_parse(since))
        return items


def changed_since_parse(value: str) -> datetime:
    """An ISO 8601 date-time, as UTC. Naive values are UTC; odd offsets (PostgreSQL refuses beyond ±15:59) are
    converted here so the database only ever sees UTC."""
    try:
        moment = parse_datetime(value.replace(" ", "+"))  # a "+01:00" offset arrives as " 01:00" unless encoded
        if moment is None:
            raise ValueError(value)
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, UTC)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise TrawlError("changed_since must be an ISO 8601 date-time", field="changed_since") from None


class JSONLinesRenderer(renderers.BaseRenderer):
    """Lets `?format=jsonl` (or Accept: application/x-ndjson) through content negotiation; the view streams."""

    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


class CSVRenderer(JSONLinesRenderer):
    media_type = "text/csv"
    format = "csv"


EXPORT_RENDERERS = [renderers.JSONRenderer, JSONLinesRenderer, CSVRenderer]


def job_items_export(*, job: CrawlJob, fmt: str) -> StreamingHttpResponse:
    """Every item the job saw, streamed in chunks (no pagination): one JSON object per line, or CSV rows."""
    rows = _sighting_rows(job)
    if fmt == "csv":
        response = StreamingHttpResponse(_csv_lines(rows, _data_keys(job)), content_type="text/csv; charset=utf-8")
    else:
        lines = (json.dumps(row, default=str) + "\n" for row in rows)
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-items.{fmt}"'
    return response


def _sighting_rows(job: CrawlJob) -> Iterator[dict]:
    sightings = ItemSighting.objects.filter(job=job).select_related("item").order_by("item_id")
    for sighting in sightings.iterator(chunk_size=EXPORT_CHUNK):
        item = sighting.item
        yield {
            "id": item.pk,
            "fingerprint": item.fingerprint,
            "url": item.url,
            "change": sighting.change,
            "first_seen": item.first_seen.isoformat(),
            "last_seen": item.last_seen.isoformat(),
            "changed_at": item.changed_at.isoformat(),
            "data": item.data,
        }


def _data_keys(job: CrawlJob) -> list[str]:
    """Every data field any item of the job has, in first-seen order: a first pass, so CSV columns are complete."""
    keys: dict[str, None] = {}
    data_rows = ItemSighting.objects.filter(job=job).order_by("item_id").values_list("item__data", flat=True)
    for data in data_rows.iterator(chunk_size=EXPORT_CHUNK):
        keys.update(dict.fromkeys(data or {}))
    return list(keys)


def _csv_lines(rows: Iterator[dict], data_keys: list[str]) -> Iterator[str]:
    """Fixed columns, then one `data.<field>` column per data field (JSON for nested values)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*EXPORT_COLUMNS, *(f"data.{key}" for key in data_keys)])
    writer.writeheader()
    for row in rows:
        data = row.pop("data") or {}
        writer.writerow({**row, **{f"data.{key}": _cell(value) for key, value in data.items()}})
        if buffer.tell() >= 64 * 1024:  # a few rows per chunk, not one write per row
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _cell(value) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else "" if value is None else str(value)
