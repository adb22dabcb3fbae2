"""Admin for items: read-only, with the jobs that saw them and their price history."""

from django.contrib import admin

from items.models import Item, ItemPriceChange, ItemSighting


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


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("__str__", "url", "scraper", "category", "first_seen", "last_seen", "changed_at")
    list_filter = ("scraper", "category", "changed_at", "last_seen")
    search_fields = ("url", "fingerprint")
    readonly_fields = [field.name for field in Item._meta.fields]
    inlines = [PriceChangeInline, SightingInline]

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
