"""The one error type services raise, and how the API turns it into a 400."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from project.unavailable import RETRY_AFTER_SECONDS, is_outage, unavailable_body


class TrawlError(Exception):
    """A request Trawl refuses, with a message the caller can act on and the field it concerns."""

    def __init__(self, message: str, *, field: str | None = None, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status_code = status_code

    def as_dict(self) -> dict:
        return {self.field or "detail": [self.message] if self.field else self.message}


class InfrastructureUnavailable(Exception):
    """Trawl's own Redis or database stayed away longer than TRAWL_INFRA_PATIENCE_SECONDS during a crawl. Not the
    site's fault: the job is requeued, never failed with a site's error class, and its source never backs off."""


def api_exception_handler(exc, context):
    if isinstance(exc, TrawlError):
        return Response(exc.as_dict(), status=exc.status_code)
    if is_outage(exc):  # Trawl's Redis or database away: 503 with the reason (project/unavailable.py)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        return Response(unavailable_body(exc), status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)
    return exception_handler(exc, context)


__all__ = ("InfrastructureUnavailable", "TrawlError", "api_exception_handler", "status")
