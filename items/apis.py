"""REST API for items: what changed since when, with price history; streaming a job's items as JSON lines or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, renderers, serializers, viewsets
from rest_framework.request import Request

from items.models import Item
from items.selectors import items_visible, job_item_data, job_sightings
from items.serializers import ItemSerializer
from project.web.query import MomentField, QueryChecked, QueryParams

EXPORT_COLUMNS = ("id", "fingerprint", "url", "change", "first_seen", "last_seen", "changed_at")
EXPORT_CHUNK = 500


class ItemFilters(QueryParams):
    changed_since = MomentField(help_text="Only items whose content changed at or after it (ISO 8601).")
    changed_before = MomentField(help_text="Only items whose content last changed before it.")
    scraper = serializers.CharField(help_text="The scraper's name.")


@extend_schema_view(list=extend_schema(parameters=[ItemFilters]))
class ItemViewSet(QueryChecked, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = ItemSerializer
    query_params = {"list": ItemFilters}

    def list(self, request: Request, *args, **kwargs):
        """Items you can see (those your jobs saw; admins: all), most recently changed first, with price history."""
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Item]:
        return items_visible(requester=self.request.user, **self.filters)


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


def job_items_export(*, job_id: object, fmt: str) -> StreamingHttpResponse:
    """Every item the job saw, streamed in chunks (no pagination): one JSON object per line, or CSV rows."""
    rows = _sighting_rows(job_id)
    if fmt == "csv":
        lines = _csv_lines(rows, _data_keys(job_id))
        response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    else:
        lines = (json.dumps(row, default=str) + "\n" for row in rows)
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="job-{job_id}-items.{fmt}"'
    return response


def _sighting_rows(job_id: object) -> Iterator[dict]:
    for sighting in job_sightings(job_id=job_id).iterator(chunk_size=EXPORT_CHUNK):
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


def _data_keys(job_id: object) -> list[str]:
    """Every data field any item of the job has, in first-seen order: a first pass, so CSV columns are complete."""
    keys: dict[str, None] = {}
    for data in job_item_data(job_id=job_id).iterator(chunk_size=EXPORT_CHUNK):
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
