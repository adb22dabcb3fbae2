"""The admin of sources: filter by kind, status and due time; see when each runs next and why; crawl now."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timeuntil

from crawls.models import ACTIVE_STATUSES, CrawlJob
from project.errors import TrawlError
from sources.admin_runs import SourceOpsAdminMixin
from sources.models import Source
from sources.services.sources import EDITABLE, source_check, source_crawl_now, source_cron_book, source_save


def duration(seconds: int) -> str:
    """3600 → "1h", 5400 → "1h 30m", 45 → "45s"."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return " ".join(part for part in parts if part) or "0s"


class SourceForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")

    class Meta:
        model = Source
        fields = ["scraper", *EDITABLE]

    def _post_clean(self) -> None:
        super()._post_clean()  # the instance now holds the form's values
        try:
            source_check(self.instance)
        except TrawlError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)


def _busy() -> Exists:
    return Exists(CrawlJob.objects.filter(source=OuterRef("pk"), status__in=ACTIVE_STATUSES))


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [
            ("crawling", "Crawling (job queued or running)"),
            ("failing", "Failing (backing off)"),
            ("healthy", "Healthy"),
            ("disabled", "Disabled"),
        ]

    def queryset(self, request, queryset: QuerySet[Source]) -> QuerySet[Source]:
        if self.value() == "crawling":
            return queryset.filter(_busy())
        if self.value() == "failing":
            return queryset.filter(enabled=True, consecutive_failures__gt=0)
        if self.value() == "healthy":
            return queryset.filter(enabled=True, consecutive_failures=0)
        if self.value() == "disabled":
            return queryset.filter(enabled=False)
        return queryset


class DueFilter(admin.SimpleListFilter):
    title = "due"
    parameter_name = "due"
    SPANS = {"now": timedelta(0), "hour": timedelta(hours=1), "day": timedelta(days=1)}

    def lookups(self, request, model_admin):
        return [("now", "Due now"), ("hour", "Within an hour"), ("day", "Within a day"), ("later", "Later")]

    def queryset(self, request, queryset: QuerySet[Source]) -> QuerySet[Source]:
        now = timezone.now()
        if self.value() in self.SPANS:
            return queryset.filter(enabled=True, next_sync_at__lte=now + self.SPANS[self.value()])
        if self.value() == "later":
            return queryset.filter(next_sync_at__gt=now + self.SPANS["day"])
        return queryset


@admin.register(Source)
class SourceAdmin(SourceOpsAdminMixin, admin.ModelAdmin):
    """Edits go through the source services: the same checks as the API, and the interval stays within bounds."""

    form = SourceForm
    list_display = ("url", "kind", "strategy", "scraper", "priority", "enabled", "next_run", "interval", "last_outcome")
    list_filter = ("kind", StatusFilter, DueFilter, "strategy", "enabled", "scraper")
    list_select_related = ("scraper",)
    search_fields = ("url",)
    readonly_fields = (
        "next_run",
        "schedule_note",
        "current_interval",
        "consecutive_failures",
        "last_run_at",
        "last_stats",
        "parent",
        "created_at",
        "updated_at",
        *SourceOpsAdminMixin.ops_fields,
    )
    fieldsets = (
        (None, {"fields": ("url", "kind", "strategy", "scraper", "priority", "enabled", "config")}),
        (
            "Schedule",
            {
                "fields": (
                    "next_run",
                    "schedule_note",
                    "next_sync_at",
                    ("refresh_interval", "min_interval", "max_interval"),
                    ("current_interval", "consecutive_failures", "last_run_at"),
                )
            },
        ),
        ("Crawl window", {"fields": (("window_start_hour", "window_end_hour", "timezone"), "cron")}),
        ("History", {"fields": ("parent", "last_stats", "created_at", "updated_at")}),
        ("Runs", {"fields": SourceOpsAdminMixin.ops_fields}),
    )
    actions = ["crawl_now", "enable", "disable"]

    def get_queryset(self, request):
        active = CrawlJob.objects.filter(source=OuterRef("pk"), status__in=ACTIVE_STATUSES).values("status")[:1]
        return super().get_queryset(request).annotate(active_job=Subquery(active))

    def save_model(self, request, obj: Source, form, change: bool) -> None:
        if not change or "refresh_interval" in form.changed_data:
            obj.current_interval = obj.refresh_interval
        if "cron" in form.changed_data and "next_sync_at" not in form.changed_data:
            source_cron_book(source=obj, fields={"cron": obj.cron})
        source_save(source=obj)

    @admin.display(description="next run", ordering="next_sync_at")
    def next_run(self, source: Source):
        if getattr(source, "active_job", None):
            text = f"crawling (job {source.active_job})"
        elif not source.enabled:
            text = "disabled"
        elif source.next_sync_at <= timezone.now():
            text = "due now"
        else:
            text = f"in {timeuntil(source.next_sync_at)}"
        return format_html('<span title="{}">{}</span>', source.schedule_note or "", text)

    @admin.display(description="interval", ordering="current_interval")
    def interval(self, source: Source) -> str:
        failing = f", {source.consecutive_failures} failure(s)" if source.consecutive_failures else ""
        return f"{duration(source.current_interval)}{failing}"

    @admin.display(description="last run")
    def last_outcome(self, source: Source) -> str:
        stats = source.last_stats or {}
        if not stats:
            return "–"
        error = stats.get("error_class")
        return f"{stats.get('status')}{f' ({error})' if error else ''}, {stats.get('items', 0)} item(s)"

    @admin.action(description="Crawl now")
    def crawl_now(self, request, queryset):
        queued = 0
        for source in queryset:
            try:
                source_crawl_now(source=source)
                queued += 1
            except TrawlError as exc:
                self.message_user(request, f"{source}: {exc.message}", level=messages.WARNING)
        if queued:
            self.message_user(request, f"Queued {queued} job(s).")

    @admin.action(description="Enable selected sources")
    def enable(self, request, queryset):
        self.message_user(request, f"Enabled {queryset.update(enabled=True)} source(s).")

    @admin.action(description="Disable selected sources")
    def disable(self, request, queryset):
        self.message_user(request, f"Disabled {queryset.update(enabled=False)} source(s).")
