"""`GET /api/jobs/{id}/log/`: a job's log as text/plain, one record a line, a multi-line record continued on
`| ` lines (the action lives on JobViewSet)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.renderers import BaseRenderer, JSONRenderer

from crawls.logs.joblog import LEVELS, job_log_lines, log_query
from crawls.models import CrawlJob

LOG_PARAMETERS = [
    OpenApiParameter("tail", OpenApiTypes.INT, description="only the last N records"),
    OpenApiParameter("level", OpenApiTypes.STR, enum=list(LEVELS[:4]), description="this level and above"),
    OpenApiParameter("attempt", OpenApiTypes.INT, description="that attempt's log (default: the job's current one)"),
    OpenApiParameter("q", OpenApiTypes.STR, description="only the records containing this text (case-insensitive)"),
]
LOG_RESPONSES = {(200, "text/plain"): OpenApiTypes.STR}


class PlainTextRenderer(BaseRenderer):
    """Lets `Accept: text/plain` through content negotiation; errors still read as JSON."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None) -> str:
        return data if isinstance(data, str) else json.dumps(data)


LOG_RENDERERS = [JSONRenderer, PlainTextRenderer]


def job_log_response(*, job: CrawlJob, params: Any) -> HttpResponse:
    lines = job_log_lines(job=job, **log_query(params))
    return HttpResponse("".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8")
