"""Reads over items and what each job saw of them."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from access.models import Requester
from items.models import Item, ItemSighting


def items_visible(
    *,
    requester: Requester,
    changed_since: datetime | None = None,
    changed_before: datetime | None = None,
    scraper: str | None = None,
) -> QuerySet[Item]:
    """Admins see every item; a requester its own (those its jobs produced: access.tenancy). Most recently changed
    first, with scraper, category and price history loaded; `changed_since`/`changed_before`: only items last changed
    at or after / before it; `scraper`: only the scraper of this name's."""
    items = Item.objects.select_related("scraper", "category").prefetch_related("price_changes")
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


def job_item_data(*, job_id: object) -> QuerySet:
    """The data of each item the job saw, by item id (the export's first pass over its fields)."""
    return ItemSighting.objects.filter(job_id=job_id).order_by("item_id").values_list("item__data", flat=True)
