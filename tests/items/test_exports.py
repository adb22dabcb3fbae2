"""Item exports: `?format=parquet` (and `jsonl`, `csv`) on a job's items and on the item list, streamed."""

from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
import pytest

from access.services import token_issue
from crawls.models import CrawlJob
from items.parquet import BATCH_ROWS, PARQUET_MEDIA_TYPE, parquet_chunks
from registry.models import Scraper
from tests.items.export_rows import as_parquet_row, body, jsonl_rows, parquet_rows
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db
ITEMS = [
    {"url": "http://shop.test/1", "title": "Mug", "price": 12, "stock": True, "tags": ["kitchen"]},
    {"url": "http://shop.test/2", "title": "Teapot", "price": 12.5, "specs": {"litres": 1.2}},
    {"url": "http://shop.test/3", "title": "Kettle", "price": None, "stock": False, "tags": []},
]


def crawl(requester, items=ITEMS, scraper_name="shop"):
    scraper, _ = Scraper.objects.get_or_create(name=scraper_name)
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper, requester=requester)
    job_items_upsert(job=job, items=items)
    return job


def test_a_jobs_parquet_export_has_the_rows_and_values_of_its_json_lines_export(api, requester):
    job = crawl(requester)

    parquet = api.get(f"/api/jobs/{job.pk}/items/?format=parquet")
    jsonl = api.get(f"/api/jobs/{job.pk}/items/?format=jsonl")

    assert parquet.status_code == 200 and parquet.streaming
    assert parquet["Content-Type"] == PARQUET_MEDIA_TYPE
    assert parquet["Content-Disposition"] == f'attachment; filename="job-{job.pk}-items.parquet"'
    rows = parquet_rows(parquet)
    assert rows == [as_parquet_row(row) for row in jsonl_rows(jsonl)]
    # price mixes integers and decimals: float64; a field missing from a row is null there
    assert [row.get("data.price") for row in rows] == [12.0, 12.5, None]
    assert [row.get("data.stock") for row in rows] == [True, None, False]
    assert rows[1]["data.specs"] == '{"litres": 1.2}'


def test_the_item_list_exports_with_its_filters_and_only_your_items(api, requester):
    crawl(requester)
    crawl(requester, [{"url": "http://other.test/1", "title": "Lamp"}], scraper_name="lamps")
    someone, _ = token_issue(requester_name="bob")
    crawl(someone, [{"url": "http://shop.test/9", "title": "Hidden"}])

    parquet = api.get("/api/items/?format=parquet&scraper=shop")
    jsonl = api.get("/api/items/?format=jsonl&scraper=shop")

    assert parquet["Content-Disposition"] == 'attachment; filename="items.parquet"'
    rows, lines = parquet_rows(parquet), jsonl_rows(jsonl)
    assert sorted(row["data.title"] for row in rows) == ["Kettle", "Mug", "Teapot"]
    assert [row["id"] for row in rows] == [line["id"] for line in lines]
    assert {row["scraper"] for row in rows} == {"shop"}
    as_csv = list(csv.DictReader(io.StringIO(body(api.get("/api/items/?format=csv&scraper=shop")).decode())))
    assert [int(row["id"]) for row in as_csv] == [line["id"] for line in lines]
    assert {row["data.title"] for row in as_csv} == {"Kettle", "Mug", "Teapot"}
    assert api.get("/api/items/?format=parquet&scraperr=shop").status_code == 400


def test_an_empty_export_is_a_parquet_file_with_the_fixed_columns(api, requester):
    job = crawl(requester, [])

    table = pq.read_table(io.BytesIO(body(api.get(f"/api/jobs/{job.pk}/items/?format=parquet"))))

    assert table.num_rows == 0
    assert table.column_names[:3] == ["id", "fingerprint", "url"]


def test_rows_are_written_in_row_groups_as_they_come():
    rows = [{"id": n, "data": {"n": n, "big": 2**70 if n == 5 else n}} for n in range(BATCH_ROWS * 2 + 1)]

    chunks = list(parquet_chunks(lambda: iter(rows), columns=("id",)))

    assert len(chunks) == 4  # a row group per batch, then the footer
    parquet = pq.ParquetFile(io.BytesIO(b"".join(chunks)))
    assert parquet.metadata.num_row_groups == 3
    table = parquet.read()
    assert str(table.schema.field("data.n").type) == "int64"
    assert table.column("data.big").to_pylist()[5] == str(2**70)  # beyond int64: written as JSON text
