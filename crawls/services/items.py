"""Upserting items: one row per (scraper, fingerprint), so a re-crawl updates instead of duplicating."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from django.db import transaction
from django.utils import timezone

from crawls.models import CrawlJob, Item, ItemChange, ItemSighting

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
    known = dict(
        Item.objects.select_for_update()
        .filter(scraper_id=job.scraper_id, fingerprint__in=list(latest))
        .values_list("fingerprint", "content_hash")
    )
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
            )
        )
    # New and changed rows in one INSERT ... ON CONFLICT DO UPDATE (first_seen is kept): far cheaper than
    # bulk_update's CASE per field, and a row a concurrent job inserted since we looked is updated, not a failure.
    Item.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["scraper", "fingerprint"],
        update_fields=["data", "content_hash", "url", "last_seen", "changed_at", "last_job"],
    )
    Item.objects.filter(scraper_id=job.scraper_id, fingerprint__in=unchanged).update(last_seen=now, last_job=job)
    ids = dict(
        Item.objects.filter(scraper_id=job.scraper_id, fingerprint__in=list(latest)).values_list("fingerprint", "pk")
    )
    ItemSighting.objects.bulk_create(
        [ItemSighting(job=job, item_id=ids[fp], change=change) for fp, change in changes.items()],
        ignore_conflicts=True,
    )
    return Counter(changes.values())
