"""Ingestion: items are checked against their version's schema and normalized before they are upserted."""

from crawls.ingestion.pipeline import Ingestion, job_schema
from crawls.ingestion.prices import ParsedPrice, currency_code, price_parse
from crawls.ingestion.schema import ItemSchema, item_clean

__all__ = ["Ingestion", "ItemSchema", "ParsedPrice", "currency_code", "item_clean", "job_schema", "price_parse"]
