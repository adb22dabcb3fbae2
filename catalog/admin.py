from __future__ import annotations

from django.contrib import admin, messages

from catalog.models import Category, CategoryMap, MapStatus
from catalog.services import category_map_confirm, category_maps_auto


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    list_display = ("name", "keywords")
    search_fields = ("name", "keywords")


@admin.register(CategoryMap)
class CategoryMapAdmin(admin.ModelAdmin):
    """Choosing a category (here or in the list) confirms it: automatic runs never overwrite a confirmed mapping."""

    list_display = ("external_name", "category", "status", "score", "confirmed_by", "updated_at")
    list_editable = ("category",)
    list_filter = ("status", "category")
    search_fields = ("external_name",)
    readonly_fields = ("external_name", "score", "status", "confirmed_by", "created_at", "updated_at")
    actions = ["confirm", "map_now"]

    def has_add_permission(self, request) -> bool:
        return False  # names arrive with items

    def save_model(self, request, obj: CategoryMap, form, change) -> None:
        if "category" in form.changed_data or obj.status != MapStatus.CONFIRMED:
            category_map_confirm(category_map=obj, category=obj.category, user=request.user)

    @admin.action(description="Confirm the selected mappings as they are")
    def confirm(self, request, queryset) -> None:
        for row in queryset:
            category_map_confirm(category_map=row, category=row.category, user=request.user)

    @admin.action(description="Run the automatic mapping now (unmapped names only)")
    def map_now(self, request, queryset) -> None:
        mapped = category_maps_auto()
        self.message_user(request, f"{mapped} name(s) mapped automatically.", level=messages.INFO)
