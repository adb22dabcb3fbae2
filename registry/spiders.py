"""Resolving a ScraperVersion's `spider` dotted path to a Scrapy Spider class."""

from __future__ import annotations

from django.utils.module_loading import import_string
from scrapy import Spider

from project.errors import TrawlError


def spider_load(path: str) -> type[Spider]:
    try:
        spider_cls = import_string(path)
    except ImportError as exc:
        raise TrawlError(f"cannot import {path!r}: {exc}", field="spider") from exc
    if not (isinstance(spider_cls, type) and issubclass(spider_cls, Spider)):
        raise TrawlError(f"{path!r} is not a scrapy.Spider subclass", field="spider")
    return spider_cls
