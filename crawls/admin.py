from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from crawls.models import Batch, CrawlJob, JobStatus
from crawls.selectors import batch_totals, batches_counted
from crawls.services import job_cancel
from crawls.services.batches import batch_cancel
from ops.admin_parts import JobOpsAdminMixin
from project.errors import TrawlError

STATUS_COLOURS = {
    JobStatus.QUEUED: "#6c757d",
    JobStatus.RUNNING: "#0d6efd",
    JobStatus.SUCCEEDED: "#198754",
    JobStatus.FAILED: "#dc3545",
    JobStatus.CANCELLED: "#fd7e14",
    JobStatus.DEAD: "#212529",
}


@admin.register(CrawlJob)
class CrawlJobAdmin(JobOpsAdminMixin, admin.ModelAdmin):
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
    readonly_fields = [field.name for field in CrawlJob._meta.fields if field.name != "alerts"] + [
        *JobOpsAdminMixin.ops_fields
    ]
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


BATCH_BAR_ORDER = (
    JobStatus.SUCCEEDED,
    JobStatus.FAILED,
    JobStatus.DEAD,
    JobStatus.CANCELLED,
    JobStatus.RUNNING,
    JobStatus.QUEUED,
)


class BatchJobInline(admin.TabularInline):
    model = CrawlJob
    fields = ("job_link", "url", "status_badge", "error_class", "attempt", "started_at", "finished_at")
    readonly_fields = fields
    ordering = ("queued_at",)
    extra = 0
    can_delete = False
    max_num = 0
    show_change_link = False

    @admin.display(description="job")
    def job_link(self, job: CrawlJob):
        url = reverse("admin:crawls_crawljob_change", args=[job.pk])
        return format_html('<a href="{}">{}</a>', url, str(job.pk)[:8])

    @admin.display(description="status")
    def status_badge(self, job: CrawlJob):
        colour = STATUS_COLOURS.get(job.status, "#6c757d")
        return format_html('<b style="color:{}">{}</b>', colour, job.get_status_display())


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ("__str__", "requester", "status", "progress", "total", "priority", "created_at", "finished_at")
    list_filter = ("status", "requester")
    search_fields = ("id", "name")
    readonly_fields = ("progress", "live_totals", *[field.name for field in Batch._meta.fields])
    date_hierarchy = "created_at"
    inlines = [BatchJobInline]
    actions = ["cancel"]

    def get_queryset(self, request):
        return batches_counted(super().get_queryset(request))

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="jobs by status")
    def live_totals(self, batch: Batch) -> str:
        return ", ".join(f"{status} {count}" for status, count in batch_totals(batch).items() if count) or "–"

    @admin.display(description="progress")
    def progress(self, batch: Batch):
        """A bar of the batch's jobs by outcome (green succeeded, red failed ... grey queued) and done/total."""
        totals = batch_totals(batch)
        total = max(batch.total, sum(totals.values()), 1)
        segments = format_html_join(
            "",
            '<span title="{} {}" style="display:inline-block;height:10px;width:{}%;background:{}"></span>',
            (
                (totals[status], status, f"{100 * totals[status] / total:.2f}", STATUS_COLOURS[status])
                for status in BATCH_BAR_ORDER
                if totals.get(status)
            ),
        )
        done = sum(count for status, count in totals.items() if status not in ("queued", "running"))
        return format_html(
            '<span style="display:inline-block;width:160px;background:#e9ecef;line-height:0;vertical-align:middle">'
            "{}</span> {}/{}",
            segments,
            done,
            batch.total,
        )

    @admin.action(description="Cancel selected batches")
    def cancel(self, request, queryset):
        cancelled = 0
        for batch in queryset:
            try:
                batch_cancel(batch=batch)
                cancelled += 1
            except TrawlError as exc:
                self.message_user(request, f"{batch}: {exc.message}", level=messages.WARNING)
        if cancelled:
            self.message_user(request, f"Cancelling {cancelled} batch(es); running crawls stop within seconds.")
