"""Trawl's Redis away: the web keeps answering what needs only the database, and answers 503 with the reason where
Redis is needed — never a 500 (project/web/unavailable.py). Its database away: every API endpoint answers 503 too."""

from __future__ import annotations

import pytest

from tests.e2e.faults_stack import PrivateRedis

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_gone(settings, tmp_path):
    from project.redis import get_redis

    server = PrivateRedis(tmp_path).start()
    settings.REDIS_URL = server.url
    get_redis.cache_clear()
    try:
        yield server
    finally:
        server.stop()
        get_redis.cache_clear()


def test_while_redis_is_away_database_endpoints_answer_and_the_others_say_503(
    api, admin_api, builtins, redis_gone, monkeypatch, settings
):
    monkeypatch.setattr("project.messaging.messages.send", lambda *args, **kwargs: None)
    settings.TRAWL_API_RATE = settings.TRAWL_API_ADMIN_RATE = "1000/minute"  # counted in Redis: open while it is away
    job_id = api.post("/api/jobs/", {"url": "http://127.0.0.1:9/x"}, format="json").json()["id"]
    redis_gone.stop()

    for path in (f"/api/jobs/{job_id}/", "/api/jobs/", f"/api/jobs/{job_id}/items/", "/api/items/", "/api/batches/"):
        assert api.get(path).status_code == 200, path
    created = api.post("/api/jobs/", {"url": "http://127.0.0.1:9/y"}, format="json")
    assert created.status_code == 201, created.content  # the database is the truth: the reaper publishes it later

    for client, path in ((api, f"/api/jobs/{job_id}/log/"), (api, "/api/stats/"), (admin_api, "/api/stats/")):
        response = client.get(path)
        assert response.status_code == 503, (path, response.status_code, response.content[:300])
        assert response.json()["unavailable"] == "redis" and "Redis is unavailable" in response.json()["detail"]
        assert response["Retry-After"] == "5"


def test_admin_views_that_need_redis_say_503_too(client, admin_user, redis_gone):
    client.force_login(admin_user)
    redis_gone.stop()
    response = client.get("/admin/ops/dashboard/")  # its live numbers are Redis counters
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert b"Redis is unavailable" in response.content


@pytest.fixture
def database_gone():
    """The web's database connection pointed where no database answers (a file that cannot be opened, a port nobody
    listens on): each query fails as during a restart. Restored afterwards."""
    from django.db import connection

    from tests.chaos.harness import free_port

    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent/trawl/db.sqlite3"
    else:
        connection.settings_dict["PORT"] = free_port()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)


def test_while_the_database_is_away_the_api_says_503_not_500(api, database_gone):
    for path in ("/api/jobs/", "/api/jobs/00000000-0000-0000-0000-000000000000/", "/api/batches/"):
        response = api.get(path)
        assert response.status_code == 503, (path, response.status_code, response.content[:300])
        assert response.json()["unavailable"] == "database", response.json()
        assert "database is unavailable" in response.json()["detail"]
        assert response["Retry-After"] == "5"


def test_a_redis_cluster_without_a_primary_for_some_slots_counts_as_redis_away_and_a_cross_slot_bug_does_not():
    import redis.exceptions

    from project.web.unavailable import unavailable_dependency

    assert unavailable_dependency(redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down")) == "redis"
    assert unavailable_dependency(redis.exceptions.ResponseError("CROSSSLOT Keys don't hash to the same slot")) is None


def test_a_redis_cluster_that_no_node_answers_at_first_connection_counts_as_redis_away():
    """redis-py wraps the refused connection in its catch-all RedisClusterException: the cause decides."""
    import socket

    import redis.exceptions
    from redis.cluster import RedisCluster

    from project.web.unavailable import unavailable_dependency

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(redis.exceptions.RedisClusterException) as refused:
        RedisCluster(host="127.0.0.1", port=port).ping()
    assert unavailable_dependency(refused.value) == "redis"
    mistake = redis.exceptions.RedisClusterException("Keys in request don't hash to the same slot")
    assert unavailable_dependency(mistake) is None
