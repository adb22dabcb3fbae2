"""Items: what scrapers found, upserted by fingerprint, with the jobs that saw them and their price history.

The tables keep the names the crawls app gave them before it was split.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Item(models.Model):
    """One thing a scraper found, upserted by fingerprint so re-crawls update instead of duplicating."""

    scraper = models.ForeignKey("registry.Scraper", on_delete=models.CASCADE, related_name="items")
    # Whose item it is (access.tenancy): the same page crawled for two requesters is two items.
    tenant = models.ForeignKey("access.Requester", on_delete=models.CASCADE, related_name="items")
    fingerprint = models.CharField(max_length=64)
    url = models.URLField(max_length=2000, blank=True)
    data = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    changed_at = models.DateTimeField(default=timezone.now)
    last_job = models.ForeignKey("crawls.CrawlJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Our category, when the item's external `category` is mapped (catalog.CategoryMap).
    category = models.ForeignKey(
        "catalog.Category", null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    # The item's external `category` name as a plain indexed column, so mapping a name never scans every item's JSON.
    category_name = models.CharField(max_length=300, blank=True, db_index=True)

    class Meta:
        db_table = "crawls_item"
        ordering = ["-last_seen"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "scraper", "fingerprint"], name="unique_item_per_tenant_scraper")
        ]

    def __str__(self) -> str:
        return self.data.get("title") or self.url or self.fingerprint


class ItemChange(models.TextChoices):
    NEW = "new", "New"
    CHANGED = "changed", "Changed"
    UNCHANGED = "unchanged", "Unchanged"


class ItemSighting(models.Model):
    """That a job saw an item, and whether it was new, changed or unchanged then."""

    job = models.ForeignKey("crawls.CrawlJob", on_delete=models.CASCADE, related_name="sightings")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="sightings")
    change = models.CharField(max_length=10, choices=ItemChange.choices)

    class Meta:
        db_table = "crawls_itemsighting"
        constraints = [models.UniqueConstraint(fields=["job", "item"], name="unique_sighting")]

    def __str__(self) -> str:
        return f"{self.job_id} saw {self.item_id} ({self.change})"


class ItemPriceChange(models.Model):
    """An item's price moved: from what to what, seen by which job. The latest few are kept per item."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="price_changes")
    job = models.ForeignKey("crawls.CrawlJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    old_price = models.CharField(max_length=40, blank=True)
    old_currency = models.CharField(max_length=3, blank=True)
    new_price = models.CharField(max_length=40, blank=True)
    new_currency = models.CharField(max_length=3, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "crawls_itempricechange"
        ordering = ["-changed_at", "-pk"]
        indexes = [models.Index(fields=["item", "-changed_at"], name="price_change_item_recent")]

    def __str__(self) -> str:
        return f"{self.old_price} {self.old_currency} → {self.new_price} {self.new_currency}"
