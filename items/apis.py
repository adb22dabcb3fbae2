"""REST API for items: what changed since when, with price history; streaming the items (a job's, or the list's) as
JSON lines, CSV or Parquet."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, renderers, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from items.models import Item
from items.parquet import PARQUET_MEDIA_TYPE, parquet_chunks
from items.selectors import item_changes, items_data, items_visible, job_item_data, job_items_seen
from items.serializers import FieldChangeSerializer, ItemSerializer
from project.web.csv_cells import csv_cell
from project.web.query import MomentField, QueryChecked, QueryParams

EXPORT_COLUMNS = ("id", "fingerprint", "url", "change", "first_seen", "last_seen", "changed_at")
LIST_EXPORT_COLUMNS = ("id", "scraper", "fingerprint", "url", "category", "first_seen", "last_seen", "changed_at")
EXPORT_FORMATS = ("jsonl", "csv", "parquet")  # streamed whole (no pagination) instead of a JSON page
EXPORT_CHUNK = 500


class ItemFilters(QueryParams):
    changed_since = MomentField(help_text="Only items whose content changed at or after it (ISO 8601).")
    changed_before = MomentField(help_text="Only items whose content last changed before it.")
    scraper = serializers.CharField(help_text="The scraper's name.")


class ChangeFilters(QueryParams):
    volatile = serializers.BooleanField(default=False, help_text="true: also the changes of volatile fields.")


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


class ParquetRenderer(JSONLinesRenderer):
    media_type = PARQUET_MEDIA_TYPE
    format = "parquet"
    charset = None


EXPORT_RENDERERS = [renderers.JSONRenderer, JSONLinesRenderer, CSVRenderer, ParquetRenderer]


@extend_schema_view(
    list=extend_schema(
        parameters=[
            ItemFilters,
            OpenApiParameter(
                "format", str, enum=["json", *EXPORT_FORMATS], description="jsonl, csv, parquet: stream every item"
            ),
        ]
    ),
    changes=extend_schema(parameters=[ChangeFilters]),
)
class ItemViewSet(QueryChecked, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = ItemSerializer
    query_params = {"list": ItemFilters, "changes": ChangeFilters}
    renderer_classes = EXPORT_RENDERERS
    lookup_value_regex = "[0-9]+"

    def list(self, request: Request, *args, **kwargs):
        """Items you can see (those your jobs saw; admins: all), most recently changed first, with price history.

        `?format=jsonl`, `csv` or `parquet` streams every item the filters keep (no pagination, no price history).
        """
        if request.accepted_renderer.format in EXPORT_FORMATS:
            items = items_visible(requester=request.user, price_history=False, **self.filters)
            return items_export(items=items, fmt=request.accepted_renderer.format)
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Item]:
        if self.action != "list":
            return items_visible(requester=self.request.user)
        return items_visible(requester=self.request.user, **self.filters)

    @extend_schema(responses=FieldChangeSerializer(many=True))
    @action(detail=True, methods=["get"], renderer_classes=[renderers.JSONRenderer])
    def changes(self, request: Request, pk: str) -> Response:
        """The item's field changes, newest first: per field its old and new value, the job and the time (the latest
        TRAWL_ITEM_CHANGES_MAX). Changes of volatile fields (those that move on most runs of their source) made no
        change of the item and are left out unless `?volatile=true`."""
        volatile = self.filters.get("volatile", False)
        page = self.paginate_queryset(item_changes(item=self.get_object(), volatile=volatile))
        return self.get_paginated_response(FieldChangeSerializer(page, many=True).data)


def job_items_export(*, job_id: object, fmt: str) -> StreamingHttpResponse:
    """Every item the job saw, streamed in chunks (no pagination): one JSON object per line, CSV rows or Parquet."""
    keys = _data_keys(job_id) if fmt == "csv" else []
    return _export(lambda: job_export_rows(job_id), EXPORT_COLUMNS, fmt=fmt, name=f"job-{job_id}-items", data_keys=keys)


def items_export(*, items: QuerySet[Item], fmt: str) -> StreamingHttpResponse:
    """The list's items (its filters applied), streamed like a job's."""
    keys = _keys_of(items_data(items=items).iterator(chunk_size=EXPORT_CHUNK)) if fmt == "csv" else []
    return _export(lambda: _item_rows(items), LIST_EXPORT_COLUMNS, fmt=fmt, name="items", data_keys=keys)


def _export(
    rows: Callable[[], Iterator[dict]], columns: tuple[str, ...], *, fmt: str, name: str, data_keys: list[str]
) -> StreamingHttpResponse:
    """`rows()` streamed as `fmt` (Parquet calls it twice: items/parquet.py), as an attachment named `name`."""
    if fmt == "csv":
        response = StreamingHttpResponse(_csv_lines(rows(), data_keys, columns), content_type="text/csv; charset=utf-8")
    elif fmt == "parquet":
        response = StreamingHttpResponse(parquet_chunks(rows, columns=columns), content_type=PARQUET_MEDIA_TYPE)
    else:
        lines = (json.dumps(row, default=str) + "\n" for row in rows())
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def job_export_rows(job_id: object) -> Iterator[dict]:
    """The rows of a job's export, whatever its format: each item it saw with the values it stored (job_items_seen)."""
    for sighting, data in job_items_seen(job_id=job_id, chunk=EXPORT_CHUNK):
        item = sighting.item
        yield {
            "id": item.pk,
            "fingerprint": item.fingerprint,
            "url": item.url,
            "change": sighting.change,
            "first_seen": item.first_seen.isoformat(),
            "last_seen": item.last_seen.isoformat(),
            "changed_at": item.changed_at.isoformat(),
            "data": data,
        }


def _item_rows(items: QuerySet[Item]) -> Iterator[dict]:
    for item in items.iterator(chunk_size=EXPORT_CHUNK):
        yield {
            "id": item.pk,
            "scraper": item.scraper.name,
            "fingerprint": item.fingerprint,
            "url": item.url,
            "category": item.category.name if item.category else None,
            "first_seen": item.first_seen.isoformat(),
            "last_seen": item.last_seen.isoformat(),
            "changed_at": item.changed_at.isoformat(),
            "data": item.data,
        }


def _data_keys(job_id: object) -> list[str]:
    """Every data field any item of the job has, in first-seen order: a first pass, so CSV columns are complete."""
    return _keys_of(job_item_data(job_id=job_id))


def _keys_of(datas: Iterable[dict | None]) -> list[str]:
    keys: dict[str, None] = {}
    for data in datas:
        keys.update(dict.fromkeys(data or {}))
    return list(keys)


def _csv_lines(rows: Iterator[dict], data_keys: list[str], fixed: tuple[str, ...]) -> Iterator[str]:
    """Fixed columns, then one `data.<field>` column per data field (JSON for nested values). Every cell, the header's
    too, is escaped so that no spreadsheet runs it as a formula (project/web/csv_cells.py)."""
    buffer = io.StringIO()
    columns = [*fixed, *(f"data.{key}" for key in data_keys)]
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(column) for column in columns])
    for row in rows:
        data = row.pop("data") or {}
        cells = {**row, **{f"data.{key}": value for key, value in data.items()}}
        writer.writerow([_cell(cells.get(column)) for column in columns])
        if buffer.tell() >= 64 * 1024:  # a few rows per chunk, not one write per row
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _cell(value) -> str:
    """Text escaped (csv_cell); numbers as they are; nested values as JSON (which starts with `{` or `[`)."""
    if isinstance(value, str):
        return csv_cell(value)
    return json.dumps(value) if isinstance(value, dict | list) else "" if value is None else str(value)
