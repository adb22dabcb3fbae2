"""A packaged version's child given a Redis user of its own could log in as Redis's `default` user instead, when that
user needs no password (Redis's own default; the shipped compose file used to leave it so): every key, the broker's
queues included. Trawl starts no child then, in the production settings: the build of a packaged version on a real
worker ends `failed`, naming the setting that would allow it, and no child's Redis user is made. `make run`'s
settings allow it (its Redis has no password), so the same package builds there. docker-compose.yml's passwords are
checked by tests/test_compose.py::test_redis_and_postgres_never_start_without_a_password.
"""

from __future__ import annotations

import pytest

from project.redis import get_redis
from project.redis.installation import installation_id
from runtime.packaged.child_redis import USER_PREFIX
from tests.clients import client_for
from tests.packages import wheel_build
from tests.security.test_packaged_secrets import (
    built,
    child_users_swept,
    package_dirs,
    upload,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["child_users_swept", "package_dirs"]  # fixtures
SPIDER = "import scrapy\n\n\nclass S(scrapy.Spider):\n    name = 's'\n"


@pytest.fixture
def packaged_worker(child_users_swept, package_dirs, monkeypatch, request):
    """The mode's worker, started with the setting as each settings module ships it (package_dirs allows it)."""
    monkeypatch.delenv("TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED", raising=False)
    return request.getfixturevalue("mode_worker")


def child_users() -> set[str]:
    """This installation's (its test database's): the Redis server's ACL users are shared with the tests that other
    pytest workers run at the same time, some of which start package children."""
    mine = f"{USER_PREFIX}{installation_id()}-"
    return {user for user in get_redis().execute_command("ACL", "USERS") if user.startswith(mine)}


def test_no_package_child_starts_on_a_redis_without_a_password_in_production(packaged_worker, package_dirs, mode):
    assert "nopass" in get_redis().execute_command("ACL", "GETUSER", "default")["flags"], "this Redis has no password"
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    files = {"plain/__init__.py": "", "plain/spiders.py": SPIDER}
    wheel = wheel_build(package_dirs["src"], name="plain", version="1.0.0", files=files)
    before = child_users()
    assert upload(ops, wheel, "1.0.0", "plain.spiders.S").status_code == 201
    version = built(ops, "1.0.0", packaged_worker)

    print(f"[{mode}] {version['package_status']}: {version['package_log'][:300]}")
    if mode == "make_run":  # development: allowed, its Redis has no password
        assert version["package_status"] == "ready", version["package_log"]
        return
    assert version["package_status"] == "failed"
    assert "TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED" in version["package_log"]
    assert "default need no password" in version["package_log"]
    assert child_users() == before, "a child's Redis user was made"
