"""Admin pages beyond the stock change forms: the per-version comparison and the set-traffic step."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from project.errors import TrawlError
from registry.forms import TrafficForm
from registry.models import Scraper
from registry.selectors import DEFAULT_WINDOW, WINDOWS, by_semver, scraper_comparison, window_start
from registry.services import traffic_set

# (label, key, formatter) rows of the comparison table; each version is a column.
METRICS = [
    ("Variant", "variant", str),
    ("State", "state", str),
    ("Traffic", "traffic_pct", lambda pct: f"{pct}%"),
    ("Default", "is_default", lambda flag: "yes" if flag else "no"),
    ("Jobs", "jobs", str),
    ("Succeeded", "succeeded", str),
    ("Failed", "failed", str),
    ("Cancelled", "cancelled", str),
    ("Success rate", "success_rate", lambda rate: "–" if rate is None else f"{rate:.1%}"),
    ("Items per job", "items_per_job", lambda value: "–" if value is None else f"{value:.2f}"),
    ("Median duration", "median_duration", lambda seconds: "–" if seconds is None else f"{seconds:.2f} s"),
    ("Error classes", "error_classes", lambda counts: ", ".join(f"{k} ×{n}" for k, n in counts.items()) or "–"),
    ("Rolled back", "rollback_reason", lambda reason: reason or "–"),
]


def comparison_table(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Rows of (label, metric key, [(version, formatted cell), ...]) for the template."""
    return [(label, key, [(row["version"], fmt(row[key])) for row in rows]) for label, key, fmt in METRICS]


def compare_view(model_admin, request: HttpRequest, scraper: Scraper) -> HttpResponse:
    window = request.GET.get("window") or DEFAULT_WINDOW
    try:
        since = window_start(window)
    except TrawlError as exc:
        model_admin.message_user(request, exc.message, messages.ERROR)
        window, since = DEFAULT_WINDOW, window_start(DEFAULT_WINDOW)
    rows = scraper_comparison(scraper=scraper, since=since)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Compare versions of {scraper.name}",
        "opts": model_admin.opts,
        "original": scraper,
        "scraper": scraper,
        "rows": rows,
        "table": comparison_table(rows),
        "windows": list(WINDOWS),
        "window": window,
        "since": since,
    }
    return TemplateResponse(request, "admin/registry/scraper/compare.html", context)


def set_traffic_view(model_admin, request: HttpRequest, queryset) -> HttpResponse | None:
    """The "Set traffic…" action: a form with every active version of the scraper, applied all at once."""
    scrapers = {version.scraper for version in queryset.select_related("scraper")}
    if len(scrapers) != 1:
        model_admin.message_user(request, "Select versions of one scraper to set its traffic.", messages.ERROR)
        return None
    scraper = scrapers.pop()
    versions = by_semver(scraper.versions.filter(deprecated_at__isnull=True))
    form = TrafficForm(request.POST if "apply" in request.POST else None, scraper=scraper, versions=versions)
    if form.is_bound and form.is_valid():
        try:
            split = traffic_set(scraper=scraper, allocation=form.allocation())
        except TrawlError as exc:
            form.add_error(None, exc.message)
        else:
            summary = ", ".join(f"{version} {pct}%" for version, pct in split.items())
            model_admin.message_user(request, f"Traffic of {scraper.name}: {summary}. Workers follow within seconds.")
            return redirect_back(request)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Set traffic of {scraper.name}",
        "opts": model_admin.opts,
        "scraper": scraper,
        "form": form,
        "selected": queryset.values_list("pk", flat=True),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "next": safe_next(request) or "",
    }
    return TemplateResponse(request, "admin/registry/scraperversion/set_traffic.html", context)


def safe_next(request: HttpRequest) -> str | None:
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return None


def redirect_back(request: HttpRequest) -> HttpResponseRedirect | None:
    """Back to the page the action came from (the comparison page), else the changelist (None)."""
    target = safe_next(request)
    return HttpResponseRedirect(target) if target else None
