"""The one error type services raise, and how the API turns errors into JSON: 400s, 415s naming the type to send,
and 404s for any path under /api/ (a malformed id never resolves to a view, so DRF never sees it)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from project.sentry import sentry_request_tags
from project.web.unavailable import RETRY_AFTER_SECONDS, is_outage, unavailable_body

API_PREFIX = "/api/"
NO_CREDENTIALS = (
    "Authentication credentials were not provided: send `Authorization: Token <token>` (or `Bearer <token>`); "
    "`manage.py issue_token <requester>` makes one."
)


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
    # DRF only here: the models and services import TrawlError, and a crawl worker never loads DRF's views (~10 MiB
    # of a pool process, with requests, urllib3 and pygments behind them).
    from rest_framework import exceptions, status
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    if isinstance(exc, TrawlError):
        return Response(exc.as_dict(), status=exc.status_code)
    if is_outage(exc):  # Trawl's Redis or database away: 503 with the reason (project/web/unavailable.py)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        return Response(unavailable_body(exc), status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response({"detail": unsupported_media_message(context)}, status=exc.status_code)
    if isinstance(exc, exceptions.NotAuthenticated):
        exc.detail = exceptions.ErrorDetail(NO_CREDENTIALS, code=exc.default_code)  # keeps its WWW-Authenticate
    response = exception_handler(exc, context)
    if response is None:  # unexpected: Django answers 500 and Sentry (if set) reports it, tagged with the request's
        sentry_request_tags(**request_facts(context))
    return response


def request_facts(context: dict) -> dict[str, str]:
    """Who asked (the requester's name, never its token), which view, and which job (a job's route)."""
    request, view = context["request"], context.get("view")
    user = getattr(request, "_user", None)  # as DRF's authentication left it: asking again could raise again
    job_id = (context.get("kwargs") or {}).get("pk", "") if request.path.startswith(f"{API_PREFIX}jobs/") else ""
    action = getattr(view, "action", None) or request.method.lower()
    return {
        "requester": str(getattr(user, "name", "") or ""),
        "view": f"{type(view).__name__}.{action}" if view is not None else "",
        "job_id": str(job_id),
    }


def unsupported_media_message(context: dict) -> str:
    """Names what was sent and what to send: a body without `Content-Type` would otherwise be read as form data
    (curl's `-d` default) and fail as a confusing "Unknown field"."""
    request = context["request"]
    expected = " or ".join(parser.media_type for parser in request.parsers)
    sent = request.content_type.split(";")[0].strip()
    got = f"Content-Type {sent!r}" if sent else "no Content-Type"
    return f"Unsupported media type: got {got}; send the body as {expected} (Content-Type: {expected.split()[0]})."


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def api_not_found() -> JsonResponse:
    return JsonResponse({"detail": "Not found."}, status=404)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/, Django's page elsewhere (the admin, the landing page)."""
    return api_not_found() if is_api(request) else defaults.page_not_found(request, exception)


class ApiNotFoundMiddleware:
    """With DEBUG on Django answers an unresolved URL with its HTML debug page, not handler404: under /api/ that
    page becomes the same JSON 404. Sits outside CommonMiddleware, whose APPEND_SLASH redirect comes first."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 404 and is_api(request) and "json" not in response.get("Content-Type", ""):
            return api_not_found()
        return response


__all__ = ("InfrastructureUnavailable", "TrawlError", "api_exception_handler", "not_found")
