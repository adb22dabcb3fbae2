"""The admin's operations dashboard: charts of the stats, drawn in the browser by the vendored Chart.js."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from ops.selectors import dashboard_data


def dashboard(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Operations",
        "is_nav_sidebar_enabled": False,  # the charts need the width more than the model list
        "data": dashboard_data(),
        "data_url": reverse("ops-dashboard-data"),
        "stats_url": reverse("stats"),
        "metrics_url": reverse("metrics"),
    }
    return TemplateResponse(request, "admin/ops/dashboard.html", context)


def dashboard_data_json(request: HttpRequest) -> JsonResponse:
    """What the page polls to redraw its charts without a reload."""
    return JsonResponse(dashboard_data())
