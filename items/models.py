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
    # When the job last stored the item: the changes recorded after it are what the job did not see (history/seen.py).
    seen_at = models.DateTimeField(null=True, blank=True)

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


class FieldChangeKind(models.TextChoices):
    ADDED = "added", "Added"
    REMOVED = "removed", "Removed"
    CHANGED = "changed", "Changed"


class ItemFieldChange(models.Model):
    """One field of an item moved: from what to what, stored by which job, when (items/history). Bounded per item:
    TRAWL_ITEM_CHANGES_MAX changes, TRAWL_ITEM_VOLATILE_CHANGES_MAX of them volatile; they go with their job."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="field_changes")
    job = models.ForeignKey("crawls.CrawlJob", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    field = models.CharField(max_length=500)  # `price`, or `sections.Pricing` one level into a dict
    path = models.JSONField()  # the field as keys (["sections", "Pricing"]): a key may hold a dot
    kind = models.CharField(max_length=7, choices=FieldChangeKind.choices)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    # A change of a field that changes on most runs of its source: kept for the job's view, never an item change.
    volatile = models.BooleanField(default=False)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-pk"]
        indexes = [models.Index(fields=["item", "-changed_at"], name="field_change_item_recent")]

    def __str__(self) -> str:
        return f"{self.field} {self.kind} on item {self.item_id}"


class SourceVolatility(models.Model):
    """Which fields of a source's items change on most of its runs (volatile), and the admins' overrides.

    `runs` keeps the last few runs' tallies, `[{"job": id, "seen": known items, "changed": {field: items}}]`; a field
    is volatile when it changed on at least half the known items of 2 of the last 3 runs (history/volatility.py)."""

    source = models.OneToOneField("sources.Source", on_delete=models.CASCADE, related_name="volatility")
    runs = models.JSONField(default=list, blank=True)
    observed = models.JSONField(default=list, blank=True, help_text="Fields the runs found volatile.")
    always = models.JSONField(default=list, blank=True, help_text="Fields always treated as volatile.")
    never = models.JSONField(default=list, blank=True, help_text="Fields never treated as volatile.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "source volatilities"

    def __str__(self) -> str:
        return f"volatile fields of source {self.source_id}"

    @property
    def effective(self) -> list[str]:
        return volatile_effective(observed=self.observed, always=self.always, never=self.never)


def volatile_effective(*, observed: list[str], always: list[str], never: list[str]) -> list[str]:
    """Volatile for a source: what its runs found or admins said always, less what they said never."""
    return sorted((set(observed or []) | set(always or [])) - set(never or []))


class ChangeWatch(models.Model):
    """An opt-in to `item.changed` webhooks: a requester's items (or one source's), rules on fields, a target URL."""

    requester = models.ForeignKey("access.Requester", on_delete=models.CASCADE, related_name="change_watches")
    source = models.ForeignKey(
        "sources.Source", null=True, blank=True, on_delete=models.CASCADE, related_name="change_watches"
    )
    target_url = models.URLField(max_length=2000)
    # [{"field": "price", "drop_pct": 5}, {"field": "stock", "appears": true}, {"field": "title"}]: any one matching.
    rules = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"watch {self.pk} of {self.requester_id} → {self.target_url}"
