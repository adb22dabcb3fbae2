"""Upserting items: one row per (scraper, fingerprint), so a re-crawl updates instead of duplicating."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.services import category_names_record
from crawls.models import CrawlJob
from items.models import Item, ItemChange, ItemPriceChange, ItemSighting

IDENTITY_FIELDS = ("fingerprint", "id", "sku", "url")


def item_fingerprint(data: dict[str, Any]) -> str:
    """Identity of an item: its own id field if it has one, else its URL, else its whole content."""
    for name in IDENTITY_FIELDS:
        if data.get(name):
            return hashlib.sha256(f"{name}:{data[name]}".encode()).hexdigest()
    return content_hash(data)


def content_hash(data: dict[str, Any]) -> str:
    # Keys starting with "_" are bookkeeping (crawl time, depth) and must not make an item look changed.
    stable = {key: value for key, value in data.items() if not key.startswith("_")}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()


@transaction.atomic
def items_upsert(*, job: CrawlJob, items: list[dict[str, Any]]) -> Counter:
    """Insert new items, update changed ones, touch unchanged ones; record what this job saw. Returns counts."""
    latest: dict[str, tuple[dict, str]] = {}
    for data in items:
        latest[item_fingerprint(data)] = (data, content_hash(data))
    if not latest:
        return Counter()
    now = timezone.now()
    known_rows = list(
        Item.objects.select_for_update()
        .filter(scraper_id=job.scraper_id, fingerprint__in=list(latest))
        .values_list("fingerprint", "content_hash", "data")
    )
    known = {fingerprint: digest for fingerprint, digest, _ in known_rows}
    old_prices = {fingerprint: price_of(data) for fingerprint, _, data in known_rows}
    categories = category_names_record(names=[data.get("category") for data, _ in latest.values()])
    rows, unchanged, changes = [], [], {}
    for fingerprint, (data, digest) in latest.items():
        if known.get(fingerprint) == digest:
            unchanged.append(fingerprint)
            changes[fingerprint] = ItemChange.UNCHANGED
            continue
        changes[fingerprint] = ItemChange.NEW if fingerprint not in known else ItemChange.CHANGED
        rows.append(
            Item(
                scraper_id=job.scraper_id,
                fingerprint=fingerprint,
                url=str(data.get("url") or "")[:2000],
                data=data,
                content_hash=digest,
                first_seen=now,
                last_seen=now,
                changed_at=now,
                last_job=job,
                category_id=categories.get(data.get("category")) if isinstance(data.get("category"), str) else None,
            )
        )
    # New and changed rows in one INSERT ... ON CONFLICT DO UPDATE (first_seen is kept): far cheaper than
    # bulk_update's CASE per field, and a row a concurrent job inserted since we looked is updated, not a failure.
    Item.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["scraper", "fingerprint"],
        update_fields=["data", "content_hash", "url", "last_seen", "changed_at", "last_job", "category"],
    )
    Item.objects.filter(scraper_id=job.scraper_id, fingerprint__in=unchanged).update(last_seen=now, last_job=job)
    ids = dict(
        Item.objects.filter(scraper_id=job.scraper_id, fingerprint__in=list(latest)).values_list("fingerprint", "pk")
    )
    ItemSighting.objects.bulk_create(
        [ItemSighting(job=job, item_id=ids[fp], change=change) for fp, change in changes.items()],
        ignore_conflicts=True,
    )
    moved = {fp: old for fp, old in old_prices.items() if changes[fp] == ItemChange.CHANGED}
    price_changes_record(job=job, ids=ids, old_prices=moved, new={fp: latest[fp][0] for fp in moved}, now=now)
    return Counter(changes.values())


def price_of(data: dict[str, Any]) -> tuple[str, str]:
    """(price, currency) as the item's data holds them ("" when absent): what a price change compares."""
    return str(data.get("price") or ""), str(data.get("currency") or "")


def price_changes_record(
    *, job: CrawlJob, ids: dict[str, int], old_prices: dict[str, tuple[str, str]], new: dict[str, dict], now
) -> None:
    """One ItemPriceChange per changed item whose price or currency moved; the latest N are kept per item."""
    rows = []
    for fingerprint, (old_price, old_currency) in old_prices.items():
        new_price, new_currency = price_of(new[fingerprint])
        if (old_price, old_currency) != (new_price, new_currency):
            rows.append(
                ItemPriceChange(
                    item_id=ids[fingerprint],
                    job=job,
                    old_price=old_price[:40],
                    old_currency=old_currency[:3],
                    new_price=new_price[:40],
                    new_currency=new_currency[:3],
                    changed_at=now,
                )
            )
    ItemPriceChange.objects.bulk_create(rows)
    keep = settings.TRAWL_INGESTION_PRICE_HISTORY
    for row in rows:
        stale = ItemPriceChange.objects.filter(item_id=row.item_id).values_list("pk", flat=True)[keep:]
        ItemPriceChange.objects.filter(pk__in=list(stale)).delete()
