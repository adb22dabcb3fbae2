"""Per job: check and normalize each item by its version's schema, count the invalid ones and keep a few of them."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from items.ingestion.schema import ItemSchema, item_clean


def job_schema(*, scraper_settings: dict | None, version_settings: dict | None) -> ItemSchema | None:
    """`TRAWL_ITEM_SCHEMA` from the scraper's settings, overridden by the version's (None: items pass as they are)."""
    merged: dict[str, Any] = dict(scraper_settings or {})
    merged.update(version_settings or {})
    return ItemSchema.from_setting(
        merged.get("TRAWL_ITEM_SCHEMA"),
        base_currency=settings.TRAWL_INGESTION_BASE_CURRENCY,
        rates=settings.TRAWL_INGESTION_RATES,
    )


class Ingestion:
    """Runs in the task thread, before the upsert. Invalid items never reach `Item`; the job keeps a sample of them."""

    def __init__(self, *, schema: ItemSchema | None, base_url: str = "", sample_size: int | None = None) -> None:
        self.schema = schema
        self.base_url = base_url
        self.sample_size = settings.TRAWL_INGESTION_INVALID_SAMPLE if sample_size is None else sample_size
        self.invalid = 0
        self.sample: list[dict[str, Any]] = []

    @classmethod
    def for_job(cls, *, scraper_settings: dict | None, version_settings: dict | None, url: str) -> Ingestion:
        """A job's ingestion: its scraper's and version's (None: no version) settings, its URL for relative links."""
        schema = job_schema(scraper_settings=scraper_settings, version_settings=version_settings)
        return cls(schema=schema, base_url=url)

    def clean(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The valid items, normalized; the invalid ones are counted and the first few kept with their reasons."""
        if self.schema is None:
            return items
        valid = []
        for data in items:
            clean, reasons = item_clean(data, schema=self.schema, base_url=self.base_url)
            if not reasons:
                valid.append(clean)
                continue
            self.invalid += 1
            if len(self.sample) < self.sample_size:
                self.sample.append({"url": str(data.get("url") or ""), "reasons": reasons, "item": _short(data)})
        return valid

    def stats(self) -> dict[str, Any]:
        return {"items_invalid": self.invalid, "invalid_sample": self.sample}


def _short(data: dict[str, Any]) -> dict[str, Any]:
    """The item as it arrived, each value cut short, so a sample stays small in the job's stats."""
    return {key: value[:200] if isinstance(value, str) else value for key, value in list(data.items())[:20]}
