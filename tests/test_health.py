"""`GET /healthz`: 200 when the database and Redis answer, 503 naming what is down."""

from __future__ import annotations

import pytest
from django.test import override_settings

from project.redis import get_redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_redis_client():
    get_redis.cache_clear()
    yield
    get_redis.cache_clear()


def test_healthy(client, redis_server):
    response = client.get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert {key: body[key] for key in ("status", "database", "redis")} == {
        "status": "ok",
        "database": "ok",
        "redis": "ok",
    }
    assert body["installation"] and body["redis_namespace"] == f"trawl:{body['installation']}:"


def test_needs_no_token(client, redis_server):
    assert client.get("/healthz").status_code == 200


def test_dead_redis_is_503_naming_redis(client, fresh_redis_client):
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")

    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "degraded"
    assert body["database"] == "ok"
    assert body["redis"] == "down"  # the fixed word: the exception goes to the log, not to an anonymous caller
