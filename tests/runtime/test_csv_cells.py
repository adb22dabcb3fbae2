"""CSV cells no spreadsheet runs: the rule (project/web/csv_cells.py) and Scrapy's CSV feed exporter with it
(runtime/items/csv_feeds.py)."""

from __future__ import annotations

import csv
import io

import pytest

from project.web.csv_cells import csv_cell
from runtime.items.csv_feeds import SafeCsvItemExporter


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_cells_starting_like_a_formula_get_a_quote(start):
    assert csv_cell(f"{start}1+1") == f"'{start}1+1"


def test_other_cells_are_left_as_they_are():
    assert csv_cell("Price: =5") == "Price: =5"
    assert csv_cell("") == ""


def test_the_csv_feed_exporter_escapes_headers_and_values_and_keeps_numbers():
    buffer = io.BytesIO()
    exporter = SafeCsvItemExporter(buffer)
    exporter.start_exporting()
    exporter.export_item({"title": '=HYPERLINK("http://evil/","x")', "-count": -5, "tags": ["@a", "b"]})
    exporter.finish_exporting()

    rows = list(csv.reader(io.StringIO(buffer.getvalue().decode())))

    assert rows == [["title", "'-count", "tags"], ['\'=HYPERLINK("http://evil/","x")', "-5", "'@a,b"]]


def test_every_crawl_exports_csv_feeds_with_it(settings):
    assert settings.TRAWL_SCRAPY_SETTINGS["FEED_EXPORTERS"]["csv"] == "runtime.items.csv_feeds.SafeCsvItemExporter"
