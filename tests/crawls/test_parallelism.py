"""`parallelism` in a job spec: checked at the door, stored, and run as shards that count once in a batch."""

from __future__ import annotations

import threading
import time

import pytest

from crawls.models import CrawlJob
from crawls.publish import RUN_CRAWL, publish_batch_chord
from crawls.services.batches import batch_create
from crawls.services.lifecycle import shard_join
from crawls.services.shards import Shard

pytestmark = pytest.mark.django_db

URL = "http://shop.test/list-1.html"


@pytest.mark.parametrize("value", [0, 33, -1, "many", 1.5, True])
def test_parallelism_outside_1_to_32_is_a_400_naming_the_field(api, builtins, value):
    response = api.post("/api/jobs/", {"url": URL, "parallelism": value}, format="json")

    assert response.status_code == 400, response.content
    assert "parallelism" in response.json()
    assert not CrawlJob.objects.exists()


def test_parallelism_is_stored_and_shown_defaulting_to_1(api, builtins):
    plain = api.post("/api/jobs/", {"url": URL}, format="json").json()
    wide = api.post("/api/jobs/", {"url": URL, "parallelism": 4}, format="json").json()

    assert (plain["parallelism"], wide["parallelism"]) == (1, 4)
    assert CrawlJob.objects.get(pk=wide["id"]).parallelism == 4


def test_a_batch_job_spec_with_bad_parallelism_creates_nothing(requester, builtins):
    from crawls.services.batches import BatchSpecError

    with pytest.raises(BatchSpecError) as error:
        batch_create(requester=requester, jobs=[{"url": URL}, {"url": URL, "parallelism": 64}])

    assert list(error.value.errors) == [1] and list(error.value.errors[1]) == ["parallelism"]
    assert not CrawlJob.objects.exists()


def test_a_parallel_job_counts_once_in_its_batch_chord_and_its_first_shard_publishes_the_rest(
    requester, builtins, sent_tasks
):
    batch = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 3}, {"url": URL}])
    jobs = list(batch.jobs.order_by("-parallelism"))
    sent_tasks.clear()

    publish_batch_chord(batch=batch, jobs=jobs)
    assert len(sent_tasks.args_of(RUN_CRAWL)) == 2  # one header task per job, whatever its parallelism

    sent_tasks.clear()
    Shard(jobs[0], index=0).publish_others()
    shards = [kwargs["shard"] for task, _args, kwargs, _options in sent_tasks if task == RUN_CRAWL]
    assert shards == [1, 2]


def test_a_shard_joins_only_a_running_job_of_its_attempt_and_only_once(requester, builtins):
    job = CrawlJob.objects.create(url=URL, scraper_id=builtins_scraper_id(), parallelism=2)
    assert shard_join(job_id=str(job.pk), attempt=1, shard=1, worker="w/1") is None  # still queued

    CrawlJob.objects.filter(pk=job.pk).update(status="running")
    assert shard_join(job_id=str(job.pk), attempt=2, shard=1, worker="w/1") is None  # another attempt
    assert shard_join(job_id=str(job.pk), attempt=1, shard=2, worker="w/1") is None  # beyond its parallelism
    assert shard_join(job_id=str(job.pk), attempt=1, shard=1, worker="w/1").pk == job.pk
    assert shard_join(job_id=str(job.pk), attempt=1, shard=1, worker="w/2") is None  # that shard already runs


def builtins_scraper_id() -> int:
    from registry.models import Scraper

    return Scraper.objects.get(name="link").pk


def test_every_shard_runs_the_version_its_first_shard_was_routed_to(requester, builtins):
    from django.utils import timezone

    from crawls.services.execution import version_for
    from registry.models import ScraperVersion

    job = CrawlJob.objects.create(url=URL, scraper_id=builtins_scraper_id(), parallelism=2, status="running")
    routed = version_for(job=job)
    # One routing would never pick again (deprecated since): the shards keep it all the same.
    old = ScraperVersion.objects.create(scraper_id=job.scraper_id, version="0.0.1", spider=routed.spider)
    ScraperVersion.objects.filter(pk=old.pk).update(deprecated_at=timezone.now())
    CrawlJob.objects.filter(pk=job.pk).update(version=old)

    joined = shard_join(job_id=str(job.pk), attempt=1, shard=1, worker="w/1")
    assert version_for(job=joined, shard=1).pk == old.pk
    assert version_for(job=joined, shard=0).pk == routed.pk


def test_the_last_shard_waits_for_the_others_final_numbers(requester, builtins):
    job = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 2}]).jobs.get()
    last, other = Shard(job, index=0), Shard(job, index=1)
    other.total({"pages": 7})  # left the frontier; its task is about to record its last pages
    late = threading.Timer(0.3, lambda: other.total({"pages": 9}, final=True))
    late.start()
    started = time.monotonic()
    try:
        assert last.others_final(progress={"pages": 5}, timeout=10) is True
        waited = time.monotonic() - started
        total = last.total({"pages": 5}, final=True)
    finally:
        late.cancel()
        last.frontier.delete()

    assert waited >= 0.25, "returned before the other shard's final numbers were there"
    assert total["pages"] == 14 and "final" not in total
    assert total["pages_by_shard"] == {"1:0": 5, "1:1": 9}


def test_a_shard_that_ends_before_it_ever_recorded_numbers_is_still_waited_for(requester, builtins):
    """A fast shard may finish before its first tick records anything: the shard that ends the job must still wait
    for its final numbers, or the job ends on the others' alone (pages 0, `failed`, while this one fetched them)."""
    job = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 2}]).jobs.get()
    first, last = Shard(job, index=0), Shard(job, index=1)
    first.scrapy_settings()  # opened the frontier and started its crawl, and has recorded nothing since
    last.scrapy_settings()
    late = threading.Timer(0.3, lambda: first.total({"pages": 5}, final=True))
    late.start()
    try:
        assert last.others_final(progress={"pages": 0}, timeout=10) is True
        total = last.total({"pages": 0}, final=True)
    finally:
        late.cancel()
        first.frontier.delete()

    assert total["pages"] == 5, total


def test_shards_that_the_jobs_max_pages_closed_together_wait_for_each_other_not_for_the_timeout(requester, builtins):
    """Neither left the frontier to the other: each ends the job itself, each first waiting for the other's final
    numbers. Each records its own before it waits, so neither waits out the timeout, and both see both: counting
    only its own, the shard that fetched nothing would end the job `failed` with pages 0."""
    job = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 2}]).jobs.get()
    first, second = Shard(job, index=0), Shard(job, index=1)
    first.scrapy_settings()
    second.scrapy_settings()
    answers: dict[int, bool] = {}
    ended = [
        threading.Thread(target=lambda: answers.update({0: first.others_final(progress={"pages": 5}, timeout=60)})),
        threading.Thread(target=lambda: answers.update({1: second.others_final(progress={"pages": 0}, timeout=60)})),
    ]
    try:
        for thread in ended:
            thread.start()
        for thread in ended:
            thread.join(120)
        totals = [first.total({"pages": 5}, final=True)["pages"], second.total({"pages": 0}, final=True)["pages"]]
    finally:
        first.frontier.delete()

    assert answers == {0: True, 1: True}, "one waited out its timeout"
    assert totals == [5, 5]


def test_a_shard_that_never_sends_final_numbers_holds_the_end_only_briefly(requester, builtins):
    job = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 2}]).jobs.get()
    last, dead = Shard(job, index=0), Shard(job, index=1)
    dead.total({"pages": 3})  # died after leaving the frontier
    try:
        assert last.others_final(progress={"pages": 4}, timeout=0.2) is False
        assert last.total({"pages": 4}, final=True)["pages"] == 7
    finally:
        last.frontier.delete()


def test_a_shard_leaving_to_the_last_one_has_written_its_whole_log_before_its_final_numbers(
    requester, builtins, settings, monkeypatch
):
    """The last shard ends the job once every shard's final numbers are in: by then the others' logs are readable."""
    import logging

    from crawls.logs.joblog import job_log_capture, job_log_lines
    from crawls.services.execution import shard_leave

    settings.TRAWL_JOB_LOG_FLUSH_SECONDS = 3600  # only an explicit flush writes the log during this test
    job = batch_create(requester=requester, jobs=[{"url": URL, "parallelism": 2}]).jobs.get()
    CrawlJob.objects.filter(pk=job.pk).update(status="running")
    job.refresh_from_db()
    leaving = Shard(job, index=1)
    readable_at_final: list[str] = []
    record_final = Shard.total

    def total_seen_by_the_last_shard(self, progress, *, final=False):
        if final:  # what a reader of the job's log would get at the moment the last shard may end the job
            readable_at_final.extend(job_log_lines(job=job))
        return record_final(self, progress, final=final)

    monkeypatch.setattr(Shard, "total", total_seen_by_the_last_shard)
    try:
        with job_log_capture(job_id=job.pk, attempt=1, shard=1):
            logging.getLogger("scrapy.core.engine").info("Spider closed (finished)")
            result = shard_leave(job=job, frontier=leaving, stats={"pages": 3})
    finally:
        leaving.frontier.delete()

    assert result["status"] == "running" and result["shard"] == 1
    assert any(line.endswith("Spider closed (finished)") for line in readable_at_final), readable_at_final
    assert any("the job ends with its last shard" in line for line in readable_at_final)
