"""The crawls admin: jobs and batches as read-only pages with a Cancel button."""

import base64

from django.contrib import admin, messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from crawls.admin.parts import JobErrorPagesAdminMixin, JobOpsAdminMixin
from crawls.admin.views import URL_CHARS, CancelButtonMixin, ReadOnlyAdmin, job_numbers
from crawls.logs.joblog import job_log_lines, log_query
from crawls.models import Batch, CrawlJob, JobScreenshot, JobStatus
from crawls.selectors import batch_totals, batches_counted
from crawls.services import batch_cancel, job_cancel
from items.models import ItemSighting
from project.errors import TrawlError


def _base64(image: bytes) -> str:
    return base64.b64encode(bytes(image)).decode("ascii")


STATUS_COLOURS = {
    JobStatus.QUEUED: "#6c757d",
    JobStatus.RUNNING: "#0d6efd",
    JobStatus.SUCCEEDED: "#198754",
    JobStatus.FAILED: "#dc3545",
    JobStatus.CANCELLED: "#fd7e14",
    JobStatus.DEAD: "#212529",
}


@admin.register(CrawlJob)
class CrawlJobAdmin(CancelButtonMixin, JobOpsAdminMixin, JobErrorPagesAdminMixin, ReadOnlyAdmin):
    """Jobs, read-only: the list's key columns fit 1280 px; the page lays the numbers out, with Cancel, items, log."""

    # The key columns first: whatever the window, they are never behind the list's horizontal scrollbar.
    list_display = (
        "short_id",
        "status_badge",
        "error_class",
        "pages",
        "items",
        "duration_s",
        "version_label",
        "short_url",
        "queued",
    )
    list_filter = ("status", "error_class", "scraper", "version", "batch")
    list_select_related = ("scraper", "version")
    search_fields = ("url", "id", "worker")
    readonly_fields = [field.name for field in CrawlJob._meta.fields] + [
        "numbers",
        "duration_s",
        "rendered_screenshots",
        "kept_error_pages",
        "recording_and_replays",
        *JobOpsAdminMixin.ops_fields,
    ]
    fieldsets = (
        (None, {"fields": ("id", "url", "status", "error_class", "error_message", "scraper", "version")}),
        ("numbers", {"fields": ("numbers", "job_alerts")}),
        (
            "when",
            {"fields": ("queued_at", "started_at", "finished_at", "duration_s", "heartbeat_at", "cancel_requested_at")},
        ),
        ("log", {"fields": ("job_log", "kept_error_pages", "recording_and_replays")}),
        ("screenshots", {"fields": ("rendered_screenshots",)}),
        (
            "request",
            {
                "fields": (
                    "requester",
                    "priority",
                    "requested_version",
                    "requested_variant",
                    "options",
                    "args",
                    "callback_url",
                    "source",
                    "batch",
                    "attempt",
                    "max_attempts",
                    "worker",
                )
            },
        ),
        ("raw stats", {"classes": ("collapse",), "fields": ("stats", "alerts")}),
    )
    date_hierarchy = "queued_at"
    actions = ["cancel"]
    cancel_service = staticmethod(lambda job: job_cancel(job=job))

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.log_view)
        page = self.admin_site.admin_view(self.error_page_view)
        return [
            path("<path:object_id>/log/", view, name="crawls_crawljob_log"),
            path("<path:object_id>/error-pages/<int:number>/", page, name="crawls_crawljob_error_page"),
            *super().get_urls(),
        ]

    def log_view(self, request, object_id: str) -> HttpResponse:
        """The job's log as text, with the API's `q`, `level`, `tail` and `attempt` (the job page's search box)."""
        job = get_object_or_404(self.get_queryset(request), pk=object_id)
        try:
            lines = job_log_lines(job=job, **log_query(request.GET))
        except TrawlError as exc:
            return HttpResponse(f"{exc.field}: {exc.message}\n", status=400, content_type="text/plain; charset=utf-8")
        return HttpResponse("".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8")

    def changelist_view(self, request, extra_context=None):
        # The app navigation sidebar takes a fifth of a 1280 px window; the list needs it more.
        return super().changelist_view(request, {"is_nav_sidebar_enabled": False, **(extra_context or {})})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        extra = {
            "items_seen": ItemSighting.objects.filter(job_id=job.pk).count() if job else 0,
            "has_log": bool(job and job_log_lines(job=job, tail=1)),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra_context=extra)

    @admin.display(description="rendered pages")
    def rendered_screenshots(self, job: CrawlJob):
        """Screenshots a rendered job kept (docs/rendering.md), at their size (the viewport's)."""
        shots = JobScreenshot.objects.filter(job=job)
        if not shots:
            return "none"
        return format_html_join(
            "",
            '<figure style="display:inline-block;margin:0 1em 1em 0">'
            '<img src="data:image/jpeg;base64,{}" style="max-width:640px;border:1px solid #ccc">'
            "<figcaption>{}: {}</figcaption></figure>",
            ((_base64(shot.image), shot.get_reason_display(), shot.url) for shot in shots),
        )

    @admin.display(description="job")
    def short_id(self, job: CrawlJob) -> str:
        return str(job.id)[:8]

    @admin.display(description="queued", ordering="queued_at")
    def queued(self, job: CrawlJob) -> str:
        return timezone.localtime(job.queued_at).strftime("%m-%d %H:%M:%S")

    @admin.display(description="url", ordering="url")
    def short_url(self, job: CrawlJob):
        shown = job.url if len(job.url) <= URL_CHARS else job.url[: URL_CHARS - 1] + "…"
        return format_html('<span title="{}">{}</span>', job.url, shown)

    @admin.display(description="scraper version", ordering="scraper__name")
    def version_label(self, job: CrawlJob):
        version = f" {job.version.version} ({job.version.variant})" if job.version_id else ""
        # overflow-wrap: a long scraper name breaks rather than pushing the columns after it off screen.
        return format_html('<span style="overflow-wrap:anywhere">{}{}</span>', job.scraper.name, version)

    @admin.display(description="status", ordering="status")
    def status_badge(self, job: CrawlJob):
        colour = STATUS_COLOURS.get(job.status, "#6c757d")
        return format_html('<b style="color:{}">{}</b>', colour, job.get_status_display())

    @admin.display(description="numbers")
    def numbers(self, job: CrawlJob):
        return job_numbers(job)

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
class BatchAdmin(CancelButtonMixin, ReadOnlyAdmin):
    """Batches, read-only: totals and a bar by outcome, the jobs inline, a Cancel button until it ends."""

    list_display = ("__str__", "requester", "status", "progress", "total", "priority", "created_at", "finished_at")
    list_filter = ("status", "requester")
    search_fields = ("id", "name")
    readonly_fields = ("progress", "live_totals", *[field.name for field in Batch._meta.fields])
    date_hierarchy = "created_at"
    inlines = [BatchJobInline]
    actions = ["cancel"]
    cancel_service = staticmethod(lambda batch: batch_cancel(batch=batch))

    def get_queryset(self, request):
        return batches_counted(super().get_queryset(request))

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
