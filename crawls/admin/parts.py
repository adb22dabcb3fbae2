"""What operations add to the crawls admin: a job's log and alerts.

A mixin of read-only fields, each rendered from its own template, so the job page stays the crawls app's.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from crawls.logs.error_pages import error_page_response
from crawls.logs.joblog import LOG_QUERY_MAX_CHARS, job_log_lines
from crawls.models import CrawlJob
from crawls.selectors import job_error_page_bodies, job_error_pages, job_recordings, job_replays

ADMIN_LOG_LINES = 500  # the job page shows the tail; GET /api/jobs/{id}/log/ has the whole log


class JobOpsAdminMixin:
    ops_fields = ("job_log", "job_alerts")

    @admin.display(description="log")
    def job_log(self, job: CrawlJob) -> SafeString:
        lines = job_log_lines(job=job, tail=ADMIN_LOG_LINES) if job.pk else []
        return render_to_string(
            "admin/ops/job_log.html",
            {"job": job, "lines": lines, "limit": ADMIN_LOG_LINES, "search_max": LOG_QUERY_MAX_CHARS},
        )

    @admin.display(description="alerts")
    def job_alerts(self, job: CrawlJob) -> SafeString:
        return render_to_string("admin/ops/job_alerts.html", {"alerts": job.alerts or []})


class JobErrorPagesAdminMixin:
    """The responses that made the job's spider raise, linked from the job page (runtime/watch/error_pages.py)."""

    @admin.display(description="error pages")
    def kept_error_pages(self, job: CrawlJob) -> SafeString:
        pages = list(job_error_pages(job=job)) if job.pk else []
        if not pages:
            return format_html('<span class="help">{}</span>', "none")
        return format_html_join(
            "",
            '<p class="trawl-error-page"><a href="{}">#{}</a> HTTP {} {} — {}</p>',
            (
                (
                    reverse("admin:crawls_crawljob_error_page", args=[job.pk, page.number]),
                    page.number,
                    page.status,
                    page.url,
                    page.error,
                )
                for page in pages
            ),
        )

    def error_page_view(self, request, object_id: str, number: int) -> HttpResponse:
        job = get_object_or_404(self.get_queryset(request), pk=object_id)
        return error_page_response(get_object_or_404(job_error_page_bodies(job=job), number=number))

    @admin.display(description="recording and replays")
    def recording_and_replays(self, job: CrawlJob) -> SafeString:
        """What the job recorded (option `record`) and each replay of it (docs/registry.md, "Replay")."""
        recordings = list(job_recordings(job=job)) if job.pk else []
        if not recordings:
            return format_html('<span class="help">{}</span>', "not recorded")
        kept = format_html(
            "<p>{} response(s), {} item(s){}</p>",
            sum(r.responses for r in recordings),
            sum(len(r.items) for r in recordings),
            " — truncated at its bound" if any(r.truncated for r in recordings) else "",
        )
        replays = format_html_join(
            "",
            '<p class="trawl-replay">replay {} by {}: <b>{}</b> {}</p>',
            (
                (replay.pk, replay.version.version, replay.status, replay.error or replay.report.get("summary", ""))
                for replay in job_replays(job=job)
            ),
        )
        return format_html("{}{}", kept, replays)
