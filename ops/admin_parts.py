"""What operations add to the crawls admin: a job's log and alerts, a source's runs as a chart.

Mixins of read-only fields, each rendered from its own template, so the job and source pages stay the crawls app's.
"""

from __future__ import annotations

from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from crawls.models import CrawlJob
from ops.joblog import job_log_lines
from ops.runs import run_numbers, source_runs
from sources.models import Source

ADMIN_LOG_LINES = 500  # the job page shows the tail; GET /api/jobs/{id}/log/ has the whole log
ADMIN_RUNS = 30


class JobOpsAdminMixin:
    ops_fields = ("job_log", "job_alerts")

    @admin.display(description="log")
    def job_log(self, job: CrawlJob) -> SafeString:
        lines = job_log_lines(job=job, tail=ADMIN_LOG_LINES) if job.pk else []
        return render_to_string("admin/ops/job_log.html", {"job": job, "lines": lines, "limit": ADMIN_LOG_LINES})

    @admin.display(description="alerts")
    def job_alerts(self, job: CrawlJob) -> SafeString:
        return render_to_string("admin/ops/job_alerts.html", {"alerts": job.alerts or []})


class SourceOpsAdminMixin:
    ops_fields = ("runs_chart",)

    @admin.display(description="runs")
    def runs_chart(self, source: Source) -> SafeString:
        runs = list(source_runs(source=source)[:ADMIN_RUNS]) if source.pk else []
        rows = [
            {"at": job.queued_at.strftime("%m-%d %H:%M"), "status": job.status, **run_numbers(job)}
            for job in reversed(runs)
        ]
        return render_to_string("admin/ops/source_runs.html", {"runs": rows, "source": source})
