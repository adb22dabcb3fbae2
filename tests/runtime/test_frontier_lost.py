"""The job's frontier in Redis, lost or ended: its epoch (a frontier Redis lost is noticed, never rebuilt in part), a
fresh one for the next attempt only, a shard of an ended job stopping without writing."""

from __future__ import annotations

import os

import pytest

from crawls.services.lifecycle import AttemptCause, job_attempt_over, job_claim
from crawls.services.shards import Shard, job_frontier
from runtime.frontier import FINGERPRINT_BYTES, Frontier, FrontierEnded, FrontierLost, binary_redis, frontier_delete
from tests.runtime import frontier_fixtures
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.django_db
frontier, slow_chain = frontier_fixtures.frontier, frontier_fixtures.slow_chain  # fixtures


def lose(frontier: Frontier) -> None:
    """What Redis emptied (restarted without its data, flushed) does to a job: every key of its frontier gone."""
    client = binary_redis()
    if keys := list(client.scan_iter(frontier.key("*"))):
        client.delete(*keys)


def test_a_frontier_redis_lost_is_noticed_by_every_call_and_none_rebuilds_it(frontier):
    frontier.renew()
    frontier.push(b"one")
    [member] = frontier.pop()
    lose(frontier)

    with pytest.raises(FrontierLost):
        frontier.commit(requests=[(b"found", 0, b"\x01" * FINGERPRINT_BYTES)], items=[b"{}"], done=[member], take=8)
    with pytest.raises(FrontierLost):
        frontier.renew()
    with pytest.raises(FrontierLost):
        frontier.stored(1, progress={"pages": 1})
    assert frontier.try_finish() == "lost"  # never "last": the crawl does not end as if the site were done
    assert frontier.release() == 0
    assert frontier.adopt(10) == []
    assert frontier.lost
    assert list(binary_redis().scan_iter(frontier.key("*"))) == []  # not half a frontier for the next attempt to trust


def test_after_a_loss_only_the_next_attempt_creates_a_fresh_frontier_and_the_old_shards_stay_out(frontier):
    first = frontier.open(create=True)
    other = job_frontier("test-job", attempt=1, shard=1)
    assert other.open(create=False) == first  # the other shards join the frontier shard 0 opened
    frontier.renew()
    other.renew()
    frontier.push(b"page", fingerprint=b"\x01" * FINGERPRINT_BYTES)
    lose(frontier)
    binary_redis().sadd(frontier.key("seen"), b"\x02" * FINGERPRINT_BYTES)  # a write that outlived the loss

    with pytest.raises(FrontierLost):  # a shard of the same attempt never recreates it: the others still run
        job_frontier("test-job", attempt=1, shard=1).open(create=False)
    fresh = job_frontier("test-job", attempt=2, shard=0)
    epoch = fresh.open(create=True)

    assert epoch and epoch != first
    assert fresh.push(b"start", fingerprint=b"\x02" * FINGERPRINT_BYTES)  # what outlived the loss is gone
    with pytest.raises(FrontierLost):  # a shard of the lost frontier writes nothing into the new one
        other.commit(requests=[(b"late", 0, None)], take=1)
    assert other.try_finish() == "lost"
    assert frontier.try_finish() == "lost"
    fresh.renew()
    assert [Frontier.payload(member) for member in fresh.pop(5)] == [b"start"]


def test_a_shard_still_crawling_when_another_ended_the_job_stops_without_writing(frontier):
    frontier.renew()
    frontier.push(b"one")
    # Another shard ended the job (timeout, cancel): its frontier went with it.
    frontier_delete(job_id="test-job", ttl_seconds=3600)

    with pytest.raises(FrontierEnded):
        frontier.commit(requests=[(b"found", 0, None)], take=8)
    with pytest.raises(FrontierEnded):
        frontier.stored(1, progress={"pages": 1})
    assert frontier.try_finish() == "ended"
    assert frontier.renew() == -1
    assert list(binary_redis().scan_iter(frontier.key("*"))) == [frontier.key("ended").encode()]


def test_a_job_whose_frontier_is_lost_before_its_final_tally_is_requeued_to_a_fresh_frontier(api, builtins, sent_tasks):
    """The shards' side (crawls.services.shards): shard 0 opens the frontier, the others join it; a tally after the
    loss raises (the task then requeues the job, never ends it), a shard joining late never recreates it, and shard 0
    of the next attempt starts a fresh one."""
    response = api.post("/api/jobs/", {"url": "http://shop.test/", "parallelism": 2}, format="json")
    job = job_claim(job_id=response.json()["id"], attempt=1, worker="test")
    first, second = Shard(job, index=0), Shard(job, index=1)
    epoch = first.scrapy_settings()["TRAWL_FRONTIER"]["epoch"]
    assert second.scrapy_settings()["TRAWL_FRONTIER"]["epoch"] == epoch
    first.total({"pages": 3})
    lose(first.frontier)

    with pytest.raises(FrontierLost):
        first.total({"pages": 5}, final=True)  # the last look before the outcome
    with pytest.raises(FrontierLost):
        Shard(job, index=1).scrapy_settings()
    with pytest.raises(FrontierLost):
        first.check_intact({})
    # What job_execute does with it.
    requeued = job_attempt_over(job=job, cause=AttemptCause.FRONTIER_LOST, reason="FrontierLost")
    fresh = Shard(requeued, index=0).scrapy_settings()["TRAWL_FRONTIER"]["epoch"]

    assert (requeued.status, requeued.attempt, requeued.max_attempts - requeued.attempt) == ("queued", 2, 2)
    assert fresh and fresh != epoch
    job_frontier(job.pk).delete()


def test_a_late_shard_of_an_ended_job_opens_nothing():
    frontier_delete(job_id="ended-job", ttl_seconds=3600)
    late = job_frontier("ended-job", attempt=1, shard=0)
    assert late.open(create=True) == ""
    assert late.renew() == -1
    assert list(binary_redis().scan_iter(late.key("*"))) == [late.key("ended").encode()]
    late.delete()


LOSS_SCRIPT = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.frontier import FrontierLost, binary_redis
from crawls.services.shards import job_frontier
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

url, job = sys.argv[1], uuid.uuid4().hex
frontier, client = job_frontier(job), binary_redis()
store = storing_tick(frontier)
state = {"stored": 0, "lost": False}

def tick(session):
    if state["stored"] >= 3 and not state["lost"]:  # Redis emptied under the crawl
        client.delete(*list(client.scan_iter(frontier.key("*"))))
        state["lost"] = True
    try:
        state["stored"] += session.items.qsize()
        store(session)
    except FrontierLost:
        pass  # the task would stop the crawl now; here the crawl is left to notice by itself
    return ""

crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 500}, "config": {}},
    timeout=60,
    on_tick=tick,
    tick_seconds=0.2,
)
left = sorted(key.decode().rsplit(":", 1)[-1] for key in list(client.scan_iter(frontier.key("*"))))
print(json.dumps({"reason": crawl.finish_reason, "lost": crawl.stats.get("frontier/lost"), "left": left,
                  "errors": crawl.stats.get("trawl/infrastructure_errors"),
                  "pages": crawl.stats.get("response_received_count")}))
"""


def test_a_crawl_whose_frontier_redis_lost_stops_by_itself_and_rebuilds_nothing(slow_chain, redis_server):
    """The scheduler notices at its next commit: it sends nothing more (no key of the frontier comes back) and closes
    the spider as `frontier_lost`, with the stats the task reads to requeue the job (crawls.services.execution)."""
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_INSTALLATION_ID": "frontier-loss-test"}
    done = script_run(LOSS_SCRIPT, f"{slow_chain.url}/slow/620000", env=env)

    assert done.returncode == 0, done.stderr[-3000:]
    report = last_json_line(done)
    assert (report["reason"], report["lost"]) == ("frontier_lost", 1), report
    assert report["errors"] >= 1 and report["left"] == []
    assert report["pages"] < 100  # stopped within a few pages of the loss, not at the end of the 500-page chain
