"""Upserting items: one row per (scraper, fingerprint), so a re-crawl updates instead of duplicating."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from access.models import Requester
from catalog.services import MAX_NAME, category_names_record
from items.bulk import rows_upsert
from items.history.record import ChunkHistory, history_enabled
from items.models import ChangeWatch, Item, ItemChange, ItemPriceChange, ItemSighting
from project.errors import TrawlError
from project.net import target_check

IDENTITY_FIELDS = ("fingerprint", "id", "sku", "url")
ITEM_COLUMNS = (
    *("tenant", "scraper", "fingerprint", "url", "data", "content_hash", "first_seen", "last_seen", "changed_at"),
    *("last_job", "category", "category_name"),
)
ITEM_COLUMNS_UPDATED = (
    "data",
    "content_hash",
    "url",
    "last_seen",
    "changed_at",
    "last_job",
    "category",
    "category_name",
)
SIGHTING_COLUMNS = ("job", "item", "change", "seen_at")


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
def items_upsert(
    *, job_id: int, scraper_id: int, tenant_id: int, items: list[dict[str, Any]], source_id: int | None = None
) -> Counter:
    """Insert new items, update changed ones, touch unchanged ones; record what this job saw. Returns counts.

    Items are the job's tenant's (access.tenancy.job_tenant_id: a crawl looks it up once and stores chunk after
    chunk): another requester's item with the same fingerprint is never read nor written. With field history on
    (TRAWL_ITEM_CHANGES_MAX), each moved field is recorded, and an item whose only moved fields are volatile for the
    job's source (items/history/volatility.py) is stored but counted unchanged."""
    latest: dict[str, tuple[dict, str]] = {}
    for data in items:
        latest[item_fingerprint(data)] = (data, content_hash(data))
    if not latest:
        return Counter()
    now = timezone.now()
    own = Item.objects.filter(tenant_id=tenant_id, scraper_id=scraper_id)
    known_rows = list(
        own.select_for_update()
        .filter(fingerprint__in=list(latest))
        .values_list("fingerprint", "pk", "content_hash", "data", "changed_at")
    )
    ids = {fingerprint: pk for fingerprint, pk, *_ in known_rows}
    known = {fingerprint: (digest, data, changed_at) for fingerprint, _, digest, data, changed_at in known_rows}
    moved = [
        fingerprint for fingerprint, (_, digest) in latest.items() if known.get(fingerprint, (digest,))[0] != digest
    ]
    history = ChunkHistory(job_id=job_id, source_id=source_id, now=now) if history_enabled() else None
    old = {fingerprint: known[fingerprint][1] for fingerprint in moved}
    changed = changed_for_real(history=history, old=old, latest=latest, seen=len(known))
    categories = category_names_record(names=[data.get("category") for data, _ in latest.values()])
    rows, unchanged, changes = [], [], {}
    for fingerprint, (data, digest) in latest.items():
        if fingerprint in known and known[fingerprint][0] == digest:
            unchanged.append(fingerprint)
            changes[fingerprint] = ItemChange.UNCHANGED
            continue
        if fingerprint not in known:
            changes[fingerprint], changed_at = ItemChange.NEW, now
        elif fingerprint in changed:
            changes[fingerprint], changed_at = ItemChange.CHANGED, now
        else:  # only volatile fields moved: the new values are stored, the item did not change
            changes[fingerprint], changed_at = ItemChange.UNCHANGED, known[fingerprint][2]
        category = data.get("category")
        category_id = categories.get(category) if isinstance(category, str) else None
        url, category_name = str(data.get("url") or "")[:2000], category_name_of(data)
        # In ITEM_COLUMNS' order; the three times are first_seen, last_seen and changed_at.
        times = (now, now, changed_at)
        rows.append((tenant_id, scraper_id, fingerprint, url, data, digest, *times, job_id, category_id, category_name))
    # New and changed rows in one INSERT ... ON CONFLICT DO UPDATE (first_seen is kept): a row a concurrent job
    # inserted since we looked is updated, not a failure. It returns the rows' ids where the database can.
    upserted = rows_upsert(
        Item,
        ITEM_COLUMNS,
        rows,
        conflict=("tenant", "scraper", "fingerprint"),
        update=ITEM_COLUMNS_UPDATED,
        returning=("fingerprint", "id"),
    )
    ids.update(upserted)
    if unchanged:
        own.filter(fingerprint__in=unchanged).update(last_seen=now, last_job_id=job_id)
    if missing := [fingerprint for fingerprint in latest if fingerprint not in ids]:
        ids.update(own.filter(fingerprint__in=missing).values_list("fingerprint", "pk"))
    # seen_at is the job's latest store of the item: what changed after it, the job did not see (history/seen.py).
    sightings = [(job_id, ids[fingerprint], change, now) for fingerprint, change in changes.items()]
    rows_upsert(ItemSighting, SIGHTING_COLUMNS, sightings, conflict=("job", "item"), update=("seen_at",))
    old_prices = {fp: price_of(known[fp][1]) for fp in changed}
    price_changes_record(
        job_id=job_id, ids=ids, old_prices=old_prices, new={fp: latest[fp][0] for fp in changed}, now=now
    )
    if history is not None:
        history.record(ids=ids)  # last: it locks the source's volatility row until the commit
    return Counter(changes.values())


def changed_for_real(
    *, history: ChunkHistory | None, old: dict[str, dict], latest: dict[str, tuple[dict, str]], seen: int
) -> set[str]:
    """Of the known items whose content hash moved (`old`: their stored data), those that changed: all of them
    without field history; with it, those with a field moved that is not volatile for the source (each diffed, the
    chunk's `seen` known items counted into the source's volatility)."""
    if history is None:
        return set(old)
    for fingerprint, data in old.items():
        history.diff(fingerprint, data, latest[fingerprint][0])
    return history.settle(seen=seen)


def category_name_of(data: dict[str, Any]) -> str:
    name = data.get("category")
    return name if isinstance(name, str) and len(name) <= MAX_NAME else ""


def price_of(data: dict[str, Any]) -> tuple[str, str]:
    """(price, currency) as the item's data holds them ("" when absent): what a price change compares."""
    return str(data.get("price") or ""), str(data.get("currency") or "")


def price_changes_record(
    *, job_id: int, ids: dict[str, int], old_prices: dict[str, tuple[str, str]], new: dict[str, dict], now
) -> None:
    """One ItemPriceChange per changed item whose price or currency moved; the latest N are kept per item."""
    rows = []
    for fingerprint, (old_price, old_currency) in old_prices.items():
        new_price, new_currency = price_of(new[fingerprint])
        if (old_price, old_currency) != (new_price, new_currency):
            rows.append(
                ItemPriceChange(
                    item_id=ids[fingerprint],
                    job_id=job_id,
                    old_price=old_price[:40],
                    old_currency=old_currency[:3],
                    new_price=new_price[:40],
                    new_currency=new_currency[:3],
                    changed_at=now,
                )
            )
    ItemPriceChange.objects.bulk_create(rows)
    price_history_prune(item_ids={row.item_id for row in rows})


def price_history_prune(*, item_ids: set[int]) -> int:
    """Keep the latest TRAWL_INGESTION_PRICE_HISTORY changes of each item: one ranked read and one delete for all
    the items of a chunk, not two queries per item."""
    if not item_ids:
        return 0
    rank = Window(RowNumber(), partition_by=[F("item_id")], order_by=[F("changed_at").desc(), F("pk").desc()])
    ranked = ItemPriceChange.objects.filter(item_id__in=item_ids).annotate(rank=rank)
    stale = list(ranked.filter(rank__gt=settings.TRAWL_INGESTION_PRICE_HISTORY).values_list("pk", flat=True))
    if not stale:
        return 0
    return ItemPriceChange.objects.filter(pk__in=stale).delete()[0]


def items_categorize(*, external_name: str, category_id: int | None) -> int:
    """Items whose `category` field is this external name now carry the internal category (an indexed column: no
    scan of every item's JSON). Subscribed to catalog's name mapping (items/apps.py)."""
    return Item.objects.filter(category_name=external_name).update(category_id=category_id)


@transaction.atomic
def change_watch_create(
    *, requester: Requester, source: Any = None, target_url: str, rules: list, enabled: bool = True
) -> ChangeWatch:
    """A requester's opt-in to `item.changed` events (a source's items: admins only), its target checked like every
    callback URL."""
    if source is not None and not requester.is_admin:
        raise TrawlError("only admins may watch a source's items", field="source")
    target_check(target_url, field="target_url")
    return ChangeWatch.objects.create(
        requester=requester, source=source, target_url=target_url, rules=rules, enabled=enabled
    )
