from dataclasses import asdict

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from crawls.models import Batch, CrawlJob, DomainThrottle, Item, ItemPriceChange, ItemSighting, JobStatus, Proxy
from crawls.selectors import batch_totals, batches_counted
from crawls.services import job_cancel
from crawls.services.batches import batch_cancel
from crawls.services.throttles import (
    default_limits,
    domain_normalize,
    proxies_cool_down_end,
    throttle_delete,
    throttle_save,
    throttle_update,
)
from crawls.source_admin import SourceAdmin  # noqa: F401  (registers itself)
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


class DomainThrottleForm(forms.ModelForm):
    class Meta:
        model = DomainThrottle
        fields = ["domain", "rate", "burst", "ip_rate", "ip_burst", "scale", "blocked", "note"]

    def clean_domain(self) -> str:
        try:
            return domain_normalize(self.cleaned_data["domain"])
        except TrawlError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean(self):
        cleaned = super().clean()
        for name in ("burst", "ip_burst"):
            if cleaned.get(name) is not None and cleaned[name] < 1:
                self.add_error(name, "At least 1; to stop all requests, tick blocked.")
        return cleaned


@admin.register(DomainThrottle)
class DomainThrottleAdmin(admin.ModelAdmin):
    """Saves go through the throttle services, which publish the rule to Redis: running crawls obey it at once."""

    form = DomainThrottleForm
    list_display = ("domain", "rate", "burst", "ip_rate", "ip_burst", "scale", "blocked", "updated_at")
    list_filter = ("blocked",)
    search_fields = ("domain", "note")
    actions = ["block", "unblock"]

    def get_changeform_initial_data(self, request) -> dict:
        return {**asdict(default_limits()), **super().get_changeform_initial_data(request)}

    def save_model(self, request, obj, form, change) -> None:
        throttle_save(throttle=obj)

    def delete_model(self, request, obj) -> None:
        throttle_delete(throttle=obj)

    def delete_queryset(self, request, queryset) -> None:
        for throttle in queryset:
            throttle_delete(throttle=throttle)

    @admin.action(description="Block selected domains")
    def block(self, request, queryset):
        for throttle in queryset:
            throttle_update(throttle=throttle, blocked=True)
        self.message_user(request, f"Blocked {queryset.count()} domain(s); running crawls drop their requests now.")

    @admin.action(description="Unblock selected domains")
    def unblock(self, request, queryset):
        for throttle in queryset:
            throttle_update(throttle=throttle, blocked=False)
        self.message_user(request, f"Unblocked {queryset.count()} domain(s).")


@admin.register(Proxy)
class ProxyAdmin(admin.ModelAdmin):
    list_display = ("__str__", "egress_label", "group", "enabled", "cooling", "cooling_down_until")
    list_filter = ("enabled", "group")
    search_fields = ("url", "egress_label", "note")
    actions = ["end_cool_down"]

    @admin.display(description="cooling down", boolean=True)
    def cooling(self, proxy: Proxy) -> bool:
        return bool(proxy.cooling_down_until and proxy.cooling_down_until > timezone.now())

    @admin.action(description="End the cool-down of selected proxies")
    def end_cool_down(self, request, queryset):
        count = proxies_cool_down_end(proxies=queryset)
        self.message_user(request, f"{count} proxy(ies) back in rotation (workers see it within seconds).")
