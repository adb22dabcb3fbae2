"""`GET /api/stats/`: rolling-window counters per domain, scraper and version; queue depths; workers."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ops.selectors import stats_report


class StatsView(APIView):
    """An admin token reads everyone's numbers, the queues and the workers; a requester token its own numbers only."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "refresh_workers",
                OpenApiTypes.BOOL,
                description="Kept for older clients: the workers list is always current (each node writes its own "
                "presence every few seconds), so it changes nothing. Refused (403) for requester tokens, whose "
                "reports leave the workers out.",
            )
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        """Jobs by final status, pages, bytes, items new/changed/unchanged, HTTP status codes, error classes and
        throttle waits over the last 900, 3600 and 86400 seconds and for the lifetime — in total and per domain,
        scraper and scraper version (`{name: {window: numbers}}`) — plus queue depths per priority step (0 is the
        most urgent), unacknowledged messages, queued/running jobs, and the workers seen. A requester token gets
        the same shape for its own jobs only, without queues and workers."""
        refresh = request.query_params.get("refresh_workers", "").lower() in {"1", "true", "yes"}
        requester = request.user
        if requester.is_admin:
            return Response(stats_report())
        if refresh:
            raise PermissionDenied("refresh_workers reads every worker: it needs an admin token.")
        return Response(stats_report(tenant=requester.pk))
