"""The two front doors: `/` (a small landing page, where the admin's "View site" goes) and `/api/` (the endpoints)."""

from __future__ import annotations

from django.shortcuts import render
from django.urls import reverse as url_reverse
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from project.redis.installation import installation_id

# (name, route name, what it is): every collection a token can reach, and the pages around them.
ENDPOINTS = (
    ("jobs", "job-list", "submit crawl jobs (POST), list yours; /{id}/ detail, items, log, cancel"),
    ("batches", "batch-list", "submit many jobs with one callback; DELETE /{id}/ cancels"),
    ("items", "item-list", "what the crawls found"),
    ("sources", "source-list", "scheduled URLs (admin tokens)"),
    ("scrapers", "scraper-list", "scrapers, versions, traffic splits (admin tokens to change)"),
    ("throttles", "throttle-list", "per-domain politeness rules (admin tokens)"),
    ("stats", "stats", "rolling-window numbers, queue depths, workers"),
    ("schema", "schema", "OpenAPI schema"),
    ("docs", "swagger-ui", "Swagger UI"),
    ("health", "healthz", "is the database there, is Redis there (no token)"),
    ("metrics", "metrics", "Prometheus exposition"),
)


@extend_schema(exclude=True)
@api_view(["GET"])
@authentication_classes([])
@permission_classes([])
def api_root(request: Request) -> Response:
    """The endpoints, with absolute URLs, so `/api/` is a start rather than a 404. Every endpoint but `health` (and
    `schema`/`docs`) needs `Authorization: Token <token>`."""
    return Response(
        {
            "endpoints": {name: reverse(route, request=request) for name, route, _ in ENDPOINTS},
            "about": {name: text for name, _, text in ENDPOINTS},
            "auth": "Authorization: Token <token> or Bearer <token> (python manage.py issue_token <requester>)",
        }
    )


def landing(request) -> object:
    links = [(name, url_reverse(route), text) for name, route, text in ENDPOINTS]
    try:
        installation = installation_id()
    except Exception:  # the database is not there yet: the page still says where to look
        installation = "unknown"
    return render(request, "landing.html", {"links": links, "installation": installation})
