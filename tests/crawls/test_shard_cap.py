"""max_active_jobs counts shards (a job with parallelism N takes N), an installation-wide default caps requesters
without a cap of their own, and the fair-share pick counts running shards."""

from __future__ import annotations

import pytest
from django.utils import timezone

from access.models import Requester
from access.selectors import requester_shard_cap
from crawls.models import CrawlJob, JobStatus
from crawls.services.jobs import job_claim_fair, job_create
from project.redis import get_redis, redis_key
from tests.clients import client_for

SHOP = "http://shop.test"


@pytest.fixture(autouse=True)
def clean_turns(db):
    client = get_redis()
    for key in client.scan_iter(redis_key("fairshare", "*")):
        client.delete(key)


def capped(name: str, limit: int | None, *, admin: bool = False):
    api = client_for(name)
    Requester.objects.filter(name=name).update(max_active_jobs=limit, is_admin=admin)
    return api, Requester.objects.get(name=name)


def submit(api, *, parallelism: int = 1, n: int = 0):
    return api.post("/api/jobs/", {"url": f"{SHOP}/{n}", "parallelism": parallelism}, format="json")


@pytest.mark.django_db
def test_parallelism_beyond_the_cap_is_a_429_naming_the_limit(builtins, sent_tasks):
    api, _ = capped("narrow", 1)

    refused = submit(api, parallelism=32)

    assert refused.status_code == 429, refused.content
    detail = refused.json()["detail"]
    assert "max_active_jobs" in detail and "at most 1" in detail and "adds 32" in detail
    assert not CrawlJob.objects.filter(requester__name="narrow").exists()


@pytest.mark.django_db
def test_a_parallel_job_takes_its_parallelism_of_the_cap(builtins, sent_tasks):
    api, _ = capped("four", 4)

    assert submit(api, parallelism=4).status_code == 201
    second = submit(api, n=1)

    assert second.status_code == 429 and "it has 4" in second.json()["detail"]


@pytest.mark.django_db
def test_a_batch_counts_its_jobs_parallelism_summed(builtins, sent_tasks):
    api, requester = capped("batcher", 6)
    specs = [{"url": f"{SHOP}/a", "parallelism": 4}, {"url": f"{SHOP}/b", "parallelism": 3}]

    refused = api.post("/api/batches/", {"jobs": specs}, format="json")
    assert refused.status_code == 429, refused.content
    assert "adds 7 (its 2 job(s)' parallelism summed)" in refused.json()["detail"]
    assert not requester.batches.exists() and not CrawlJob.objects.filter(requester=requester).exists()

    specs[1]["parallelism"] = 2
    assert api.post("/api/batches/", {"jobs": specs}, format="json").status_code == 201


@pytest.mark.django_db
def test_ended_jobs_give_their_shards_back(builtins, sent_tasks):
    api, _ = capped("recycler", 4)
    job = submit(api, parallelism=4).json()
    assert submit(api, n=1).status_code == 429

    CrawlJob.objects.filter(pk=job["id"]).update(status=JobStatus.SUCCEEDED, finished_at=timezone.now())

    assert submit(api, parallelism=4, n=2).status_code == 201


@pytest.mark.django_db
def test_the_default_caps_requesters_without_a_cap_of_their_own(builtins, sent_tasks, settings):
    settings.TRAWL_DEFAULT_MAX_ACTIVE_JOBS = 40
    api, requester = capped("plain", None)

    assert submit(api, parallelism=32).status_code == 201
    refused = submit(api, parallelism=9, n=1)

    assert refused.status_code == 429 and "at most 40" in refused.json()["detail"]
    assert submit(api, parallelism=8, n=2).status_code == 201
    # An admin's own cap beats the default, either way.
    Requester.objects.filter(pk=requester.pk).update(max_active_jobs=80)
    assert submit(api, parallelism=32, n=3).status_code == 201


@pytest.mark.django_db
def test_admins_and_scheduled_work_are_not_capped_by_the_default(builtins, sent_tasks, settings):
    settings.TRAWL_DEFAULT_MAX_ACTIVE_JOBS = 2
    api, admin = capped("operator", None, admin=True)

    assert all(submit(api, parallelism=2, n=n).status_code == 201 for n in range(3))
    for n in range(3):
        job_create(url=f"{SHOP}/system/{n}", parallelism=2)  # the system tenant (scheduled work)

    assert requester_shard_cap(requester=admin) is None
    Requester.objects.filter(pk=admin.pk).update(max_active_jobs=6)  # but an admin's own cap holds
    assert submit(api, n=9).status_code == 429


@pytest.mark.django_db
def test_a_default_of_0_turns_the_default_off(builtins, sent_tasks, settings):
    settings.TRAWL_DEFAULT_MAX_ACTIVE_JOBS = 0
    api, requester = capped("unbounded", None)

    assert requester_shard_cap(requester=requester) is None
    assert all(submit(api, parallelism=32, n=n).status_code == 201 for n in range(4))


@pytest.mark.django_db
def test_the_fair_pick_counts_running_shards_not_jobs(builtins, sent_tasks):
    _, wide = capped("wide", None)
    _, narrow = capped("narrow", None)
    running = job_create(url=f"{SHOP}/wide/0", requester=wide, parallelism=3)
    CrawlJob.objects.filter(pk=running.pk).update(status=JobStatus.RUNNING, started_at=timezone.now())
    for n in (1, 2):
        CrawlJob.objects.filter(pk=job_create(url=f"{SHOP}/narrow/{n}", requester=narrow).pk).update(
            status=JobStatus.RUNNING, started_at=timezone.now()
        )
    wide_next = job_create(url=f"{SHOP}/wide/1", requester=wide)
    narrow_next = job_create(url=f"{SHOP}/narrow/3", requester=narrow)

    # wide runs one job of 3 shards, narrow two jobs of one: narrow holds fewer worker slots and is owed the next.
    claimed = job_claim_fair(job_id=str(wide_next.pk), attempt=1, worker="w")

    assert claimed.pk == narrow_next.pk


@pytest.mark.django_db
def test_the_admin_shows_the_cap_in_force(admin_client, settings):
    settings.TRAWL_DEFAULT_MAX_ACTIVE_JOBS = 100
    capped("own-cap", 7)
    capped("default-cap", None)
    capped("an-admin", None, admin=True)

    html = admin_client.get("/admin/access/requester/").content.decode()

    assert "100 (default)" in html and "no limit" in html and ">7<" in html
