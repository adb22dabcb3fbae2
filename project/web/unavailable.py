"""Trawl's Redis or database away: endpoints that need it answer 503 with the reason, never a 500 or a dropped
connection.

Endpoints that need only the database (jobs, batches, items) do not touch Redis and go on answering; the job log,
stats and the dashboard's live numbers need it. While the database restarts nothing can be answered but `/healthz`,
and every other endpoint says so with a 503 too. The answer says what is missing and when to ask again.
"""

from __future__ import annotations

import logging

import redis.exceptions
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape

logger = logging.getLogger("trawl.web")
RETRY_AFTER_SECONDS = 5


def unavailable_body(exc: Exception) -> dict[str, str]:
    dependency = unavailable_dependency(exc) or "redis"
    name = "Redis" if dependency == "redis" else "database"
    return {
        "detail": f"Trawl's {name} is unavailable ({type(exc).__name__}); this endpoint needs it. Try again shortly.",
        "unavailable": dependency,
    }


def unavailable_dependency(exc: Exception) -> str | None:
    """Which dependency `exc` says is away ("redis" or "database"), or None when it is some other error."""
    # ConnectionError and TimeoutError (and redis-py's subclasses of them): the server is away, not a bad command;
    # ClusterDownError: a Redis Cluster with slots no primary serves (a failover under way).
    away = redis.exceptions.ConnectionError | redis.exceptions.TimeoutError | redis.exceptions.ClusterDownError
    if isinstance(exc, away):
        return "redis"
    # A cluster client that reaches no node at its first connection wraps the ConnectionError in the catch-all
    # RedisClusterException (which also means client-side mistakes such as CROSSSLOT): away only with that cause.
    if isinstance(exc, redis.exceptions.RedisClusterException) and isinstance(exc.__cause__, away):
        return "redis"
    # Django's OperationalError is the driver's "server gone, refused, restarting, shutting down"; InterfaceError a
    # connection already closed under us. Bad SQL is ProgrammingError or DataError, still a 500.
    if isinstance(exc, OperationalError | InterfaceError):
        return "database"
    return None


def is_outage(exc: Exception) -> bool:
    """Trawl's Redis or its database away: answer 503, not 500."""
    return unavailable_dependency(exc) is not None


class RedisUnavailableMiddleware:
    """For views outside DRF (the admin, the dashboard) and for the database failing before DRF's handler runs (token
    authentication is a query): the same 503 instead of Django's 500 page."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exc):
        if not is_outage(exc):
            return None
        logger.warning("%s %s: %s unavailable (%s)", request.method, request.path, unavailable_dependency(exc), exc)
        body = unavailable_body(exc)
        if request.path.startswith("/api/"):
            response = JsonResponse(body, status=503)
        else:  # a person at the admin: a page, not JSON
            page = f"<!doctype html><title>503 Service Unavailable</title><h1>503</h1><p>{escape(body['detail'])}</p>"
            response = HttpResponse(page, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
