"""What operations add to the crawls admin: a job's log and alerts.

A mixin of read-only fields, each rendered from its own template, so the job page stays the crawls app's.
"""

from __future__ import annotations

from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from crawls.logs.joblog import job_log_lines
from crawls.models import CrawlJob

ADMIN_LOG_LINES = 500  # the job page shows the tail; GET /api/jobs/{id}/log/ has the whole log


class JobOpsAdminMixin:
    ops_fields = ("job_log", "job_alerts")

    @admin.display(description="log")
    def job_log(self, job: CrawlJob) -> SafeString:
        lines = job_log_lines(job=job, tail=ADMIN_LOG_LINES) if job.pk else []
        return render_to_string("admin/ops/job_log.html", {"job": job, "lines": lines, "limit": ADMIN_LOG_LINES})

    @admin.display(description="alerts")
    def job_alerts(self, job: CrawlJob) -> SafeString:
        return render_to_string("admin/ops/job_alerts.html", {"alerts": job.alerts or []})
