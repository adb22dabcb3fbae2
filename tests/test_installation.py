"""Every Trawl Redis key is namespaced by the installation, derived from the database: a fresh database on a Redis
that another Trawl (or an earlier run) used starts at zero, and `/healthz` says which namespace is in use."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from project.redis import get_redis, installation_keys_clear, redis_key
from project.redis.installation import installation_forget, installation_id
from tests.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def another_installation():
    """Switch to a "fresh database": what a new database differs in is when its first migration was applied."""

    def switch(applied: datetime) -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE django_migrations SET applied = %s WHERE id = (SELECT MIN(id) FROM django_migrations)",
                [applied],
            )
        installation_forget()
        return installation_id()

    installation_forget()
    yield switch
    installation_forget()  # the test's transaction rolls the migration row back


def finished_job(name: str):
    from crawls.models import CrawlJob
    from ops.services import job_finished_record
    from registry.models import Scraper

    started = datetime.now(tz=UTC) - timedelta(seconds=5)
    job = CrawlJob.objects.create(
        url=f"https://{name}/",
        scraper=Scraper.objects.get(name="link"),
        status="succeeded",
        started_at=started,
        finished_at=started + timedelta(seconds=1),
        stats={"pages": 1, "status_codes": {"200": 1}},
    )
    job_finished_record(job=job)


def test_keys_are_namespaced_by_the_installation_and_healthz_says_which(client, redis_server):
    body = client.get("/healthz").json()

    assert body["installation"] == installation_id()
    assert len(body["installation"]) == 8
    assert redis_key("cancel", "job", 1) == f"trawl:{body['installation']}:cancel:job:1"
    assert body["redis_namespace"] == f"trawl:{body['installation']}:"


def test_a_fresh_database_on_a_used_redis_starts_at_zero(builtins, another_installation, redis_server):
    admin = client_for("ops", admin=True)
    first = another_installation(datetime(2026, 1, 1, tzinfo=UTC))
    finished_job("earlier-run.test")
    used = admin.get("/api/stats/").json()
    assert used["totals"]["lifetime"]["jobs"]["succeeded"] >= 1
    assert "earlier-run.test" in used["domains"]

    second = another_installation(datetime(2026, 6, 1, tzinfo=UTC))
    fresh = admin.get("/api/stats/").json()

    assert second != first
    assert fresh["totals"]["lifetime"]["jobs"]["succeeded"] == 0
    assert fresh["domains"] == {}
    assert get_redis().exists(f"trawl:{first}:stats:total"), "the other installation's numbers stay where they were"
    installation_keys_clear()
    another_installation(datetime(2026, 1, 1, tzinfo=UTC))
    assert installation_keys_clear() > 0


def test_redis_clear_command_deletes_only_this_installations_keys(another_installation, redis_server):
    other = another_installation(datetime(2025, 1, 1, tzinfo=UTC))
    get_redis().set(redis_key("probe"), "1")
    mine = another_installation(datetime(2025, 2, 1, tzinfo=UTC))
    get_redis().set(redis_key("probe"), "1")
    out = io.StringIO()

    call_command("trawl_redis_clear", stdout=out)

    assert f"installation {mine}: deleted" in out.getvalue()
    assert not get_redis().exists(f"trawl:{mine}:probe")
    assert get_redis().delete(f"trawl:{other}:probe") == 1
