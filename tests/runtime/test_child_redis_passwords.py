"""A packaged crawl's child gets a Redis user of its own (runtime.packaged.child_redis), which bounds it only if it
cannot log in as another user: no child user is made while an enabled Redis user needs no password, unless
TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED says so. Against this machine's Redis (no password) and a Redis of the test's own
started with one."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
import redis

from project.redis import get_redis
from project.redis.server import redis_binary
from runtime.packaged.child_redis import ChildRedisError, child_redis_grant, child_redis_revoke, open_redis_users

pytestmark = pytest.mark.django_db
PASSWORD = "redis-test-" + "p" * 24


def child_users() -> set[str]:
    return {user for user in get_redis().execute_command("ACL", "USERS") if user.startswith("trawl-child-")}


def test_no_child_user_is_made_while_a_redis_user_needs_no_password(settings, redis_server):
    settings.TRAWL_INSTALLATION_ID = "nopass01"
    assert "default" in open_redis_users(), "this machine's Redis has no password"
    before = child_users()

    with pytest.raises(ChildRedisError, match="TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED") as refused:
        child_redis_grant(url=settings.REDIS_URL, acl=True, nopass_allowed=False)
    assert "default" in str(refused.value) and child_users() == before

    grant = child_redis_grant(url=settings.REDIS_URL, acl=True, nopass_allowed=True)  # development: allowed
    try:
        assert grant.user in child_users()
    finally:
        child_redis_revoke(grant)


@pytest.fixture
def redis_with_password(settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen([*command, "--requirepass", PASSWORD], stdout=subprocess.DEVNULL)
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline and server.poll() is None, "redis-server did not start"
                time.sleep(0.05)
        settings.REDIS_URL = url
        get_redis.cache_clear()
        yield port
    finally:
        get_redis.cache_clear()
        server.terminate()
        server.wait(10)


def test_with_a_password_the_child_gets_its_user_and_cannot_log_in_as_default(settings, redis_with_password):
    settings.TRAWL_INSTALLATION_ID = "nopass02"
    assert open_redis_users() == []

    grant = child_redis_grant(url=settings.REDIS_URL, acl=True, nopass_allowed=False)
    try:
        child = redis.Redis.from_url(grant.url, decode_responses=True)
        assert child.set("trawl:nopass02:throttle:probe", "1")
        as_default = redis.Redis(host="127.0.0.1", port=redis_with_password)
        with pytest.raises(redis.AuthenticationError):
            as_default.set("celery", "forged")
    finally:
        child_redis_revoke(grant)
