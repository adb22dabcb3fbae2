"""Reads over items and what each job saw of them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from typing import Any

from django.db.models import QuerySet

from access.models import Requester
from items.history.seen import sightings_data
from items.models import ChangeWatch, Item, ItemFieldChange, ItemSighting

SEEN_CHUNK = 500  # sightings reconstructed per query of their later changes


def items_visible(
    *,
    requester: Requester,
    changed_since: datetime | None = None,
    changed_before: datetime | None = None,
    scraper: str | None = None,
    price_history: bool = True,
) -> QuerySet[Item]:
    """Admins see every item; a requester its own (those its jobs produced: access.tenancy). Most recently changed
    first, with scraper, category and (unless `price_history` is false: exports) price history loaded;
    `changed_since`/`changed_before`: only items last changed at or after / before it; `scraper`: only the scraper of
    this name's."""
    items = Item.objects.select_related("scraper", "category")
    if price_history:
        items = items.prefetch_related("price_changes")
    if not requester.is_admin:
        items = items.filter(tenant=requester)
    if changed_since is not None:
        items = items.filter(changed_at__gte=changed_since)
    if changed_before is not None:
        items = items.filter(changed_at__lt=changed_before)
    if scraper is not None:
        items = items.filter(scraper__name=scraper)
    return items.order_by("-changed_at", "-pk")


def job_sightings(*, job_id: object) -> QuerySet[ItemSighting]:
    """What the job saw: one sighting per item (new, changed or unchanged then), its item loaded, by item id."""
    return ItemSighting.objects.filter(job_id=job_id).select_related("item").order_by("item_id")


def job_items_seen(*, job_id: object, chunk: int = SEEN_CHUNK) -> Iterator[tuple[ItemSighting, dict[str, Any]]]:
    """Every item the job saw, by item id, with its data as that job stored it (items/history/seen.py): the one row
    source of a job's item list and exports, whatever their format."""
    sightings = job_sightings(job_id=job_id).iterator(chunk_size=chunk)
    while batch := list(islice(sightings, chunk)):
        yield from zip(batch, sightings_data(batch), strict=True)


def sightings_seen(sightings: list[ItemSighting]) -> list[ItemSighting]:
    """The sightings (a page of a job's item list), each with `seen_data`: its item's data as the job stored it."""
    for sighting, data in zip(sightings, sightings_data(sightings), strict=True):
        sighting.seen_data = data
    return sightings


def job_item_data(*, job_id: object) -> Iterator[dict[str, Any]]:
    """The data of each item the job saw as the job stored it, by item id."""
    return (data for _, data in job_items_seen(job_id=job_id))


def item_changes(*, item: Item, volatile: bool = False) -> QuerySet[ItemFieldChange]:
    """The item's field changes, newest first; those of volatile fields (no change of the item) only if asked."""
    changes = ItemFieldChange.objects.filter(item=item)
    if not volatile:
        changes = changes.filter(volatile=False)
    return changes.order_by("-changed_at", "-pk")


def change_watches_of(*, requester: Requester) -> QuerySet[ChangeWatch]:
    """The requester's `item.changed` watches, oldest first."""
    return ChangeWatch.objects.filter(requester=requester).order_by("pk")


def items_data(*, items: QuerySet[Item]) -> QuerySet:
    """The data of each of `items`, in their order (an export's first pass over its fields)."""
    return items.values_list("data", flat=True)


def watchable_sources() -> QuerySet:
    """Every source (a watch may name one; sources sits above items, so its model is reached through the key)."""
    return ChangeWatch._meta.get_field("source").related_model.objects.all()
