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
    existing = {
        item.fingerprint: item
        for item in Item.objects.select_for_update().filter(scraper_id=job.scraper_id, fingerprint__in=list(latest))
    }
    fresh, changed, unchanged, changes = [], [], [], {}
    for fingerprint, (data, digest) in latest.items():
        url = str(data.get("url") or "")[:2000]
        item = existing.get(fingerprint)
        if item is None:
            fresh.append(
                Item(
                    scraper_id=job.scraper_id,
                    fingerprint=fingerprint,
                    url=url,
                    data=data,
                    content_hash=digest,
                    first_seen=now,
                    last_seen=now,
                    changed_at=now,
                    last_job=job,
                )
            )
            changes[fingerprint] = ItemChange.NEW
        elif item.content_hash != digest:
            item.data, item.content_hash, item.url = data, digest, url
            item.changed_at = item.last_seen = now
            item.last_job = job
            changed.append(item)
            changes[fingerprint] = ItemChange.CHANGED
        else:
            unchanged.append(item.pk)
            changes[fingerprint] = ItemChange.UNCHANGED
    # A concurrent job of the same scraper may have inserted the row since we looked: update it instead of failing.
    Item.objects.bulk_create(
        fresh,
        update_conflicts=True,
        unique_fields=["scraper", "fingerprint"],
        update_fields=["data", "content_hash", "url", "last_seen", "changed_at", "last_job"],
    )
    Item.objects.bulk_update(changed, ["data", "content_hash", "url", "last_seen", "changed_at", "last_job"])
    Item.objects.filter(pk__in=unchanged).update(last_seen=now, last_job=job)
    ids = dict(
        Item.objects.filter(scraper_id=job.scraper_id, fingerprint__in=list(latest)).values_list("fingerprint", "pk")
    )
    ItemSighting.objects.bulk_create(
        [ItemSighting(job=job, item_id=ids[fp], change=change) for fp, change in changes.items()],
        ignore_conflicts=True,
    )
    return Counter(changes.values())
