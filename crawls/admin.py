from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from crawls.models import CrawlJob, Item, ItemSighting, JobStatus, Source
from crawls.services import job_cancel
from crawls.services.sources import source_crawl_now
from project.errors import TrawlError

STATUS_COLOURS = {
    JobStatus.QUEUED: "#6c757d",
    JobStatus.RUNNING: "#0d6efd",
    JobStatus.SUCCEEDED: "#198754",
    JobStatus.FAILED: "#dc3545",
    JobStatus.CANCELLED: "#fd7e14",
    JobStatus.DEAD: "#212529",
}


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ("url", "kind", "strategy", "scraper", "priority", "enabled", "next_sync_at", "consecutive_failures")
    list_filter = ("kind", "strategy", "enabled", "scraper")
    search_fields = ("url",)
    actions = ["crawl_now"]

    @admin.action(description="Crawl now")
    def crawl_now(self, request, queryset):
        for source in queryset.select_related("scraper"):
            source_crawl_now(source=source)
        self.message_user(request, f"Queued {queryset.count()} job(s).")


@admin.register(CrawlJob)
class CrawlJobAdmin(admin.ModelAdmin):
    list_display = (
        "short_id",
        "url",
        "scraper",
        "version",
        "status_badge",
        "error_class",
        "pages",
        "items",
        "duration_s",
        "queued_at",
    )
    list_filter = ("status", "error_class", "scraper", "version")
    search_fields = ("url", "id", "worker")
    readonly_fields = [field.name for field in CrawlJob._meta.fields]
    date_hierarchy = "queued_at"
    actions = ["cancel"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="job")
    def short_id(self, job: CrawlJob) -> str:
        return str(job.id)[:8]

    @admin.display(description="status", ordering="status")
    def status_badge(self, job: CrawlJob):
        colour = STATUS_COLOURS.get(job.status, "#6c757d")
        return format_html('<b style="color:{}">{}</b>', colour, job.get_status_display())

    @admin.display(description="pages")
    def pages(self, job: CrawlJob):
        return (job.stats or {}).get("pages", "–")

    @admin.display(description="items")
    def items(self, job: CrawlJob):
        return (job.stats or {}).get("items", "–")

    @admin.display(description="duration")
    def duration_s(self, job: CrawlJob) -> str:
        if job.duration is not None:
            return f"{job.duration:.1f}s"
        if job.started_at:
            return f"{(timezone.now() - job.started_at).total_seconds():.0f}s…"
        return "–"

    @admin.action(description="Cancel selected jobs")
    def cancel(self, request, queryset):
        for job in queryset:
            try:
                job_cancel(job=job)
            except TrawlError as exc:
                self.message_user(request, f"{job.id}: {exc.message}", level=messages.WARNING)


class SightingInline(admin.TabularInline):
    model = ItemSighting
    fields = ("job", "change")
    readonly_fields = ("job", "change")
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("__str__", "url", "scraper", "first_seen", "last_seen", "changed_at")
    list_filter = ("scraper", "changed_at", "last_seen")
    search_fields = ("url", "fingerprint")
    readonly_fields = [field.name for field in Item._meta.fields]
    inlines = [SightingInline]
