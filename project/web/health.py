"""`GET /healthz`: is the database there, is Redis there, is the broker there when it is not that Redis
(CELERY_BROKER_URL), which installation's Redis keys this is. 503 naming what is down.

Anyone may call it (load balancers, probes), so it is cheap and says little: each web process checks at most once per
TRAWL_HEALTHZ_CACHE_SECONDS and answers every other call from that check (no broker connection per call, however
many arrive), and a check that fails answers the fixed word `down`: the exception, which may carry a host name, a
user or a driver's message, goes to the log only.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse

from project.celery import app
from project.redis import get_redis, redis_key
from project.redis.installation import installation_id

logger = logging.getLogger("trawl.health")

OK, DOWN = "ok", "down"
_lock = threading.Lock()
_last: dict = {"at": None, "body": None, "status": 0}


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_redis() -> None:
    get_redis().ping()


def _check_broker() -> None:
    with app.connection_for_read() as broker:
        broker.ensure_connection(max_retries=1, interval_start=0, timeout=5)


def _checks() -> tuple:
    checks = (("database", _check_database), ("redis", _check_redis))
    if app.conf.broker_url != settings.REDIS_URL:
        checks += (("broker", _check_broker),)
    return checks


def _check_all() -> tuple[dict, int]:
    checks = {}
    for name, check in _checks():
        try:
            check()
            checks[name] = OK
        except Exception:  # any failure means "down"; why is for the operator's log, not the caller
            logger.warning("healthz: %s is down", name, exc_info=True)
            checks[name] = DOWN
    healthy = all(value == OK for value in checks.values())
    body = {"status": "ok" if healthy else "degraded", **checks, **_installation()}
    return body, 200 if healthy else 503


def healthz(request) -> JsonResponse:
    with _lock:  # one check at a time per process: a burst of calls waits for it instead of each opening connections
        fresh = _last["at"] is not None and time.monotonic() - _last["at"] < settings.TRAWL_HEALTHZ_CACHE_SECONDS
        if not fresh:
            _last["body"], _last["status"] = _check_all()
            _last["at"] = time.monotonic()
        body, status = dict(_last["body"]), _last["status"]
    return JsonResponse(body, status=status)


def health_forget() -> None:
    """The next call checks again (tests that change what is up)."""
    with _lock:
        _last["at"] = None


def _installation() -> dict[str, str]:
    """The id that namespaces this installation's Redis keys (a fresh database gets a new one)."""
    try:
        return {"installation": installation_id(), "redis_namespace": redis_key("")}
    except Exception:  # the database is down or not migrated: the checks above already say so
        return {"installation": "unknown"}
