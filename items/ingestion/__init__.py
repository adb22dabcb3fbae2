"""Ingestion: items are checked against their version's schema and normalized before they are upserted."""

from items.ingestion.pipeline import Ingestion, job_schema
from items.ingestion.prices import ParsedPrice, currency_code, price_parse
from items.ingestion.schema import ItemSchema, item_clean

__all__ = ["Ingestion", "ItemSchema", "ParsedPrice", "currency_code", "item_clean", "job_schema", "price_parse"]
