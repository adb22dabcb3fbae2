"""A source's runs as a chart on its admin page (a read-only field rendered from its own template)."""

from __future__ import annotations

from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from crawls.runs import run_numbers
from sources.models import Source
from sources.selectors import source_runs

ADMIN_RUNS = 30


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
