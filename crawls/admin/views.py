"""What makes the job and batch admin pages read-only views: the numbers laid out, and a Cancel button's view.

Nobody edits a job or a batch (their life is the services'), so the admin shows them without Save or Delete; the
one thing an operator does to them, cancelling, is a button on the page (and an action on the list).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.safestring import SafeString

from crawls.models import CrawlJob
from project.errors import TrawlError

CHANGES = ("new", "changed", "unchanged")
URL_CHARS = 48  # a job URL longer than this is cut in the list (the whole one is its title): columns fit 1280 px


def job_numbers(job: CrawlJob) -> SafeString:
    """The job's stats as a table an operator reads at a glance, instead of a JSON blob."""
    stats = job.stats or {}
    throttle = stats.get("throttle") if isinstance(stats.get("throttle"), dict) else {}
    rows = [
        ("pages", stats.get("pages", 0)),
        ("requests", stats.get("requests", 0)),
        ("still queued", stats.get("queued", 0)),
        ("bytes", f"{stats.get('bytes', 0):,}"),
        ("items", stats.get("items", 0)),
        (
            "… new / changed / unchanged",
            " / ".join(str(stats.get(f"items_{k}", 0)) for k in ("new", "changed", "unchanged")),
        ),
        ("… invalid", stats.get("items_invalid", 0)),
        ("status codes", _counts(stats.get("status_codes"))),
        ("download errors", _counts(stats.get("download_errors"))),
        ("spider exceptions", stats.get("spider_exceptions", 0)),
        ("item pipeline errors", stats.get("item_errors", 0)),
        # Wall-clock time the crawl was held back, apart from the waits summed over concurrent requests (which may
        # add up to more than the crawl took).
        ("throttle delay", f"{throttle.get('held_seconds', 0):.1f} s ({throttle.get('waits', 0)} waits)"),
        ("… summed over requests", f"{_summed_wait(throttle):.1f} s"),
        ("finish reason", stats.get("finish_reason") or "–"),
        ("duration", f"{job.duration:.1f} s" if job.duration is not None else "–"),
    ]
    return render_to_string("admin/crawls/numbers.html", {"rows": rows})


def _summed_wait(throttle: dict) -> float:
    value = throttle.get("wait_seconds_total", throttle.get("wait_seconds", 0))  # the old name: jobs stored before
    return float(value) if isinstance(value, int | float) else 0.0


def _counts(counts: Any) -> str:
    if not isinstance(counts, dict) or not counts:
        return "–"
    return ", ".join(f"{key} ×{value}" for key, value in sorted(counts.items(), key=lambda kv: -kv[1]))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, not addable, changeable or deletable: the admin renders the page without Save / Delete."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CancelButtonMixin:
    """`<id>/cancel/` (POST): the page's Cancel button. Subclasses name `cancel_service` and the noun for messages."""

    cancel_noun = "job"

    def get_urls(self) -> list:
        opts = self.model._meta
        view = self.admin_site.admin_view(self.cancel_view)
        return [
            path("<path:object_id>/cancel/", view, name=f"{opts.app_label}_{opts.model_name}_cancel"),
            *super().get_urls(),
        ]

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, obj):
            return HttpResponseRedirect(reverse("admin:index"))
        try:
            self.cancel_service(obj)
            self.message_user(request, "Cancel requested: a running crawl stops within about a second.")
        except TrawlError as exc:
            self.message_user(request, f"Not cancelled: {exc.message}", level=messages.WARNING)
        opts = self.model._meta
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
