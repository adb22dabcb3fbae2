"""`GET /healthz`: is the database there, is Redis there, which installation's Redis keys this is. 503 naming what
is down."""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse

from project.installation import installation_id
from project.redis import get_redis, redis_key


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _check_redis() -> str:
    get_redis().ping()
    return "ok"


def healthz(request) -> JsonResponse:
    checks = {}
    for name, check in (("database", _check_database), ("redis", _check_redis)):
        try:
            checks[name] = check()
        except Exception as exc:  # any failure means "down"; say why
            checks[name] = f"down: {type(exc).__name__}: {exc}"
    healthy = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if healthy else "degraded", **checks, **_installation()}
    return JsonResponse(body, status=200 if healthy else 503)


def _installation() -> dict[str, str]:
    """The id that namespaces this installation's Redis keys (a fresh database gets a new one)."""
    try:
        return {"installation": installation_id(), "redis_namespace": redis_key("")}
    except Exception:  # the database is down or not migrated: the checks above already say so
        return {"installation": "unknown"}
