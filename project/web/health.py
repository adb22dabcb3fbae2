"""`GET /healthz`: is the database there, is Redis there, is the broker there when it is not that Redis
(CELERY_BROKER_URL), which installation's Redis keys this is. 503 naming what is down."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import JsonResponse

from project.celery import app
from project.redis import get_redis, redis_key
from project.redis.installation import installation_id


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _check_redis() -> str:
    get_redis().ping()
    return "ok"


def _check_broker() -> str:
    with app.connection_for_read() as broker:
        broker.ensure_connection(max_retries=1, interval_start=0, timeout=5)
    return "ok"


def _checks() -> tuple:
    checks = (("database", _check_database), ("redis", _check_redis))
    if app.conf.broker_url != settings.REDIS_URL:
        checks += (("broker", _check_broker),)
    return checks


def healthz(request) -> JsonResponse:
    checks = {}
    for name, check in _checks():
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
