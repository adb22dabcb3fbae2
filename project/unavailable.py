"""Trawl's Redis away: endpoints that need it answer 503 with the reason, never a 500 or a dropped connection.

Endpoints that need only the database (jobs, batches, items) do not touch Redis and go on answering; the job log,
stats and the dashboard's live numbers need it. The answer says what is missing and when to ask again.
"""

from __future__ import annotations

import logging

import redis.exceptions
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape

logger = logging.getLogger("trawl.web")
RETRY_AFTER_SECONDS = 5


def redis_unavailable_body(exc: Exception) -> dict[str, str]:
    return {
        "detail": f"Trawl's Redis is unavailable ({type(exc).__name__}); this endpoint needs it. Try again shortly.",
        "unavailable": "redis",
    }


def is_redis_outage(exc: Exception) -> bool:
    # ConnectionError and TimeoutError (and redis-py's subclasses of them): the server is away, not a bad command.
    return isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError)


class RedisUnavailableMiddleware:
    """For views outside DRF (the admin, the dashboard): the same 503 instead of Django's 500 page."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if not is_redis_outage(exc):
            return None
        logger.warning("%s %s: Redis unavailable (%s)", request.method, request.path, exc)
        body = redis_unavailable_body(exc)
        if request.path.startswith("/api/"):
            response = JsonResponse(body, status=503)
        else:  # a person at the admin: a page, not JSON
            page = f"<!doctype html><title>503 Service Unavailable</title><h1>503</h1><p>{escape(body['detail'])}</p>"
            response = HttpResponse(page, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
