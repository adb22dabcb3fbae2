from django.contrib import admin

from registry.models import Scraper, ScraperVersion


class ScraperVersionInline(admin.TabularInline):
    model = ScraperVersion
    fields = ("version", "variant", "spider", "is_default", "traffic_pct", "min_priority", "deprecated_at")
    extra = 0
    show_change_link = True


@admin.register(Scraper)
class ScraperAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "version_count", "created_at")
    search_fields = ("name", "description")
    inlines = [ScraperVersionInline]

    @admin.display(description="versions")
    def version_count(self, scraper: Scraper) -> int:
        return scraper.versions.count()


@admin.register(ScraperVersion)
class ScraperVersionAdmin(admin.ModelAdmin):
    list_display = ("scraper", "version", "variant", "traffic_pct", "is_default", "min_priority", "deprecated_at")
    list_filter = ("variant", "is_default", "scraper")
    search_fields = ("scraper__name", "version", "spider")
