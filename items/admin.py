"""Admin for items: read-only, with the jobs that saw them and their price history."""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from items.models import ChangeWatch, Item, ItemFieldChange, ItemPriceChange, ItemSighting, SourceVolatility

TITLE_CHARS = 48
URL_CHARS = 56


def _shortened(text: str, limit: int):
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return format_html('<span title="{}">{}</span>', text, shown)


def _when(moment: datetime | None) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "–"


class SightingInline(admin.TabularInline):
    model = ItemSighting
    fields = ("job", "change")
    readonly_fields = ("job", "change")
    extra = 0
    can_delete = False
    max_num = 0


class PriceChangeInline(admin.TabularInline):
    """The item's price history, newest first."""

    model = ItemPriceChange
    fields = ("changed_at", "old_price", "old_currency", "new_price", "new_currency", "job")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


class FieldChangeInline(admin.TabularInline):
    """The item's latest field changes, newest first (volatile ones flagged)."""

    model = ItemFieldChange
    fields = ("changed_at", "field", "kind", "old", "new", "volatile", "job")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    # Titles and URLs are shortened (in full on hover) and times compact, so "first seen" still fits at 1280 px.
    list_display = ("short_title", "short_url", "scraper", "category", "first", "last", "changed")
    list_filter = ("scraper", "category", "changed_at", "last_seen")
    search_fields = ("url", "fingerprint")
    readonly_fields = [field.name for field in Item._meta.fields]
    inlines = [FieldChangeInline, PriceChangeInline, SightingInline]

    @admin.display(description="item")
    def short_title(self, item: Item):
        return _shortened(str(item), TITLE_CHARS)

    @admin.display(description="url", ordering="url")
    def short_url(self, item: Item):
        return _shortened(item.url, URL_CHARS)

    @admin.display(description="first seen", ordering="first_seen")
    def first(self, item: Item) -> str:
        return _when(item.first_seen)

    @admin.display(description="last seen", ordering="last_seen")
    def last(self, item: Item) -> str:
        return _when(item.last_seen)

    @admin.display(description="changed", ordering="changed_at")
    def changed(self, item: Item) -> str:
        return _when(item.changed_at)

    # Read-only: items are what crawls found; no Add, Save or Delete.
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def lookup_allowed(self, lookup: str, value: str, request=None) -> bool:
        # The job page's "Items" link: the items one job saw.
        return lookup in ("sightings__job__id__exact", "sightings__job") or super().lookup_allowed(
            lookup, value, request
        )


@admin.register(SourceVolatility)
class SourceVolatilityAdmin(admin.ModelAdmin):
    """Which fields of a source change on most of its runs; `always`/`never` override what the runs found."""

    list_display = ("source", "effective_fields", "updated_at")
    fields = ("source", "observed", "always", "never", "runs", "updated_at")
    readonly_fields = ("observed", "runs", "updated_at")
    raw_id_fields = ("source",)

    @admin.display(description="volatile fields")
    def effective_fields(self, state: SourceVolatility) -> str:
        return ", ".join(state.effective) or "–"


@admin.register(ChangeWatch)
class ChangeWatchAdmin(admin.ModelAdmin):
    list_display = ("pk", "requester", "source", "target_url", "enabled")
    list_filter = ("enabled",)
    raw_id_fields = ("requester", "source")
