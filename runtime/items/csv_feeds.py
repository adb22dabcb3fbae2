"""CSV feeds (FEED_EXPORTERS `csv` of every crawl): Scrapy's exporter with formula-safe cells
(project/web/csv_cells.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.exporters import CsvItemExporter

from project.web.csv_cells import csv_cell


class SafeCsvItemExporter(CsvItemExporter):
    """Scrapy's CSV exporter with header and value cells escaped by `csv_cell` (text only: numbers stay numbers)."""

    def _build_row(self, values: Iterable[Any]) -> Iterable[Any]:
        for value in super()._build_row(values):
            yield csv_cell(value) if isinstance(value, str) else value
