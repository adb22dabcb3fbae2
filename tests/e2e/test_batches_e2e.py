"""Batches end to end: real crawl and ops workers, a local site, a local webhook receiver, and (for a worker killed
hard) a real beat running the sweepers. Each batch must yield exactly one signed `batch.completed`."""

from __future__ import annotations

import time

import pytest

from callbacks.models import Delivery
from callbacks.signing import signature_verify
from crawls.models import Batch, CrawlJob
from crawls.publish import publish_batch_chord
from crawls.services import batches
from crawls.tasks import finalize_batch, sweep_batches
from registry.models import Scraper, ScraperVersion
from tests.callbacks.harness import FAST_ENV, Beat, Receiver, exclusive, kill_hard, pause, sweepers_every
from tests.e2e.faults_stack import wait_batch
from tests.workers import ONE_CRAWL_PER_PROCESS, Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class Cluster:
    def __init__(self, ops: Worker, crawlers: Worker) -> None:
        self.ops, self.crawlers = ops, crawlers

    def logs(self) -> str:
        return f"--- ops worker ---\n{self.ops.log_tail()}\n--- crawl worker ---\n{self.crawlers.log_tail()}"


@pytest.fixture(scope="module")
def cluster(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    """An ops worker (control + callbacks) and a crawl worker of 4 processes, with fast sweeper settings."""
    log_dir = tmp_path_factory.mktemp("batch-workers")
    ops = Worker(queues="control,callbacks", concurrency=2, env=FAST_ENV, log_dir=log_dir)
    # Four crawl slots exactly (one crawl per process): the cancel test counts on jobs still queued behind them.
    crawlers = Worker(queues="crawls", concurrency=4, env={**FAST_ENV, **ONE_CRAWL_PER_PROCESS}, log_dir=log_dir)
    try:
        ops.start()
        crawlers.start()
        with exclusive(ops, crawlers):
            yield Cluster(ops, crawlers)
    finally:
        crawlers.stop()
        ops.stop()


@pytest.fixture
def slow_site(site):
    """The local site with one second per `/slow/N` page: a 20-page crawl then takes about 20 s."""
    delay, site.slow_delay = site.slow_delay, 1.0
    yield site
    site.slow_delay = delay


@pytest.fixture
def receiver():
    with Receiver() as local:
        yield local


def submit(api, **body) -> dict:
    response = api.post("/api/batches/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def wait_batch_completed(receiver, cluster, *, timeout: float) -> dict:
    try:
        receiver.wait_for(lambda r: r.events("batch.completed"), timeout=timeout, why="batch.completed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.logs()}") from None
    return receiver.events("batch.completed")[0].json


def assert_exactly_one_batch_completed(receiver, batch_id) -> None:
    # Every other path that may finalize (a late chord body, the error callback, the sweeper) runs once more.
    finalize_batch.delay(str(batch_id))
    sweep_batches.delay()
    time.sleep(3)
    completed = receiver.events("batch.completed")
    assert len(completed) == 1, [item.json["id"] for item in completed]
    assert Delivery.objects.filter(batch_id=batch_id, event="batch.completed").count() == 1


def test_batch_of_20_with_3_bad_jobs_yields_one_signed_batch_completed(
    api, requester, builtins, site, cluster, receiver
):
    broken = Scraper.objects.create(name="broken")
    ScraperVersion.objects.create(
        scraper=broken, version="0.1.0", spider="tests.fixtures.spiders.RaisingSpider", is_default=True
    )
    jobs = [{"url": f"{site.url}/product-{1 + n % 12}.html?n={n}"} for n in range(17)]
    bad = {
        f"{site.url}/missing-page.html": "http_4xx",
        "http://nonexistent.invalid/": "dns",
        f"{site.url}/product-3.html?broken": "spider_error",
    }
    jobs.insert(3, {"url": f"{site.url}/missing-page.html", "callback_url": receiver.url})
    jobs.insert(10, {"url": "http://nonexistent.invalid/", "callback_url": receiver.url})
    jobs.insert(17, {"url": f"{site.url}/product-3.html?broken", "scraper": "broken", "callback_url": receiver.url})
    jobs[0]["callback_url"] = receiver.url

    started = time.monotonic()
    batch = submit(api, name="twenty", callback_url=receiver.url, jobs=jobs)
    submitted_in = time.monotonic() - started
    payload = wait_batch_completed(receiver, cluster, timeout=120)

    assert (batch["total"], batch["status"]) == (20, "pending")
    assert submitted_in < 5
    [request] = receiver.events("batch.completed")
    assert request.headers["X-Trawl-Event"] == "batch.completed"
    assert request.headers["X-Trawl-Delivery"] == payload["id"]
    assert signature_verify(
        secret=requester.webhook_secret, body=request.body, header=request.headers["X-Trawl-Signature"]
    )
    data = payload["data"]
    assert (payload["event"], data["id"], data["status"], data["total"]) == (
        "batch.completed",
        batch["id"],
        "completed",
        20,
    )
    assert data["totals"] == {"succeeded": 17, "failed": 3, "cancelled": 0, "dead": 0}
    assert len(data["jobs"]) == 20
    failures = {job["url"]: job["error_class"] for job in data["jobs"] if job["status"] == "failed"}
    assert failures == bad
    # job.* events for the jobs that asked: the three failures with their error class, one success.
    receiver.wait_for(lambda r: len(r.events("job.failed")) == 3 and r.events("job.completed"), timeout=20)
    job_failed = {item.json["data"]["url"]: item.json["data"]["error_class"] for item in receiver.events("job.failed")}
    assert job_failed == bad
    [completed_job] = receiver.events("job.completed")
    assert completed_job.json["data"]["batch_id"] == batch["id"]
    assert completed_job.json["data"]["stats"]["pages"] == 1
    detail = api.get(f"/api/batches/{batch['id']}/").json()
    assert (detail["status"], detail["done"], detail["totals"]["succeeded"]) == ("completed", 20, 17)
    # The result backend (what Flower and `celery result` read) says FAILURE with the error class for the failed
    # crawls, SUCCESS for the others: the chord still counted every one and the batch completed.
    failed_ids = {job["id"]: job["error_class"] for job in data["jobs"] if job["status"] == "failed"}
    states = crawl_task_states({job["id"] for job in data["jobs"]})
    assert {job_id for job_id, (state, _) in states.items() if state == "FAILURE"} == set(failed_ids), states
    for job_id, error_class in failed_ids.items():
        _, exc = states[job_id]
        assert type(exc).__name__ == "CrawlFailed" and str(exc).startswith(f"{error_class}: "), repr(exc)
    assert sum(state == "SUCCESS" for state, _ in states.values()) == 17
    # ... and the worker logs that chord's error turn in a line, not as an error with a traceback.
    crawl_log = cluster.crawlers.log_tail(lines=100_000)
    assert "a crawl failed" in crawl_log and "raised: ChordError" not in crawl_log
    assert_exactly_one_batch_completed(receiver, batch["id"])


def crawl_task_states(job_ids: set[str]) -> dict[str, tuple[str, object]]:
    """Each job's run_crawl as the result backend stored it: (state, result or exception), by job id."""
    from project.celery import app

    backend = app.backend
    states = {}
    for key in backend.client.scan_iter(match=backend.get_key_for_task("*")):
        meta = backend.decode_result(backend.client.get(key))
        args = meta.get("args") or []
        if meta.get("name") == "crawls.tasks.run_crawl" and args and args[0] in job_ids:
            states[args[0]] = (meta["status"], meta["result"])
    return states


def test_cancelled_batch_stops_its_running_crawls_and_completes_cancelled(api, builtins, slow_site, cluster, receiver):
    site = slow_site
    # Eight slow crawls (about 20 s each) on four crawl processes: four run, four wait.
    jobs = [{"url": f"{site.url}/slow/{1000 * n}", "options": {"maxdepth": 20}} for n in range(8)]
    batch = submit(api, callback_url=receiver.url, jobs=jobs)

    def parsing(jobs: list[CrawlJob]) -> list[CrawlJob]:
        """Running jobs whose crawl already parsed a page: the site saw the request for their chain's second page."""
        numbers = [int(path.rsplit("/", 1)[-1]) for path in list(site.hits) if path.startswith("/slow/")]
        second = {number // 1000 for number in numbers if number % 1000 == 1}  # job n's chain starts at /slow/1000n
        return [job for job in jobs if job.status == "running" and int(job.url.rsplit("/", 1)[-1]) // 1000 in second]

    # Not cancelled before their first page: a job only claimed would stop with no page to show.
    running = parsing(wait_batch(batch["id"], lambda js: len(parsing(js)) >= 2, timeout=60, cluster=cluster))

    cancelled_at = time.monotonic()
    response = api.delete(f"/api/batches/{batch['id']}/")
    payload = wait_batch_completed(receiver, cluster, timeout=60)
    took = time.monotonic() - cancelled_at
    hits_at_end = site.slow_hits()
    time.sleep(2)

    assert response.status_code == 202, response.content
    assert took < 20, f"the batch took {took:.1f}s to complete after its cancel"
    data = payload["data"]
    assert (data["status"], data["total"]) == ("cancelled", 8)
    assert data["totals"] == {"succeeded": 0, "failed": 0, "cancelled": 8, "dead": 0}
    jobs_after = {job.pk: job for job in CrawlJob.objects.filter(batch_id=batch["id"])}
    for job in running:
        stopped = jobs_after[job.pk]
        assert (stopped.status, stopped.error_class) == ("cancelled", "cancelled")
        assert 0 < stopped.stats["pages"] < 12, "the running crawl should have stopped early"
        assert stopped.duration < 15
    never_started = [job for job in jobs_after.values() if job.started_at is None]
    assert never_started, "some jobs should have been cancelled while still queued"
    assert site.slow_hits() <= hits_at_end + 4, "crawls kept fetching after the batch was cancelled"
    assert Batch.objects.get(pk=batch["id"]).status == "cancelled"
    assert_exactly_one_batch_completed(receiver, batch["id"])


def test_worker_killed_hard_mid_batch_still_ends_in_one_batch_completed_via_the_sweeper(
    api, builtins, slow_site, cluster, receiver, tmp_path
):
    site = slow_site
    victim = Worker(queues="crawls", concurrency=1, env={**FAST_ENV, **ONE_CRAWL_PER_PROCESS}, log_dir=tmp_path)
    beat = Beat(log_dir=tmp_path)
    try:
        # The cluster's crawl worker steps aside so the slow job (highest priority, published first) lands on victim.
        with pause([cluster.crawlers.hostname], queues=["crawls"]):
            victim.start()
            batch = submit(
                api,
                callback_url=receiver.url,
                jobs=[
                    {"url": f"{site.url}/slow/50000", "options": {"maxdepth": 20}, "priority": 90},
                    {"url": f"{site.url}/product-1.html"},
                    {"url": f"{site.url}/product-2.html"},
                ],
            )
            wait_batch(batch["id"], lambda js: any(j.status == "running" for j in js), timeout=60, cluster=cluster)
            slow = CrawlJob.objects.get(batch_id=batch["id"], status="running")
            assert "/slow/" in slow.url
            time.sleep(1.5)
            kill_hard(victim)
        # The header task of the slow job will never report: its message sits unacknowledged until the broker's
        # visibility timeout (an hour), so the chord body cannot fire. Only the sweeper can end this batch.
        sweepers_every(1)
        beat.start()
        payload = wait_batch_completed(receiver, cluster, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- victim ---\n{victim.log_tail()}\n--- beat ---\n{beat.log_tail()}") from None
    finally:
        beat.stop()
        victim.stop()

    data = payload["data"]
    assert data["status"] == "completed"
    assert data["totals"] == {"succeeded": 2, "failed": 0, "cancelled": 0, "dead": 1}
    slow.refresh_from_db()
    assert (slow.status, slow.error_class) == ("dead", "worker_lost")
    assert {job["id"]: job["status"] for job in data["jobs"]}[str(slow.pk)] == "dead"
    assert_exactly_one_batch_completed(receiver, batch["id"])


def test_a_header_task_that_raises_finalizes_through_the_chords_error_callback(
    requester, builtins, cluster, receiver, monkeypatch
):
    # The batch's jobs have ended, but one header task dies of an infrastructure fault (here: a job id that is not
    # a UUID makes the claim query raise). The chord body never runs; its error callback must finalize instead.
    monkeypatch.setattr(batches, "publish_batch_launch", lambda **kwargs: None)
    batch = batches.batch_create(requester=requester, callback_url=receiver.url, jobs=[{"url": "http://shop.test/"}])
    CrawlJob.objects.filter(batch=batch).update(status="succeeded")
    broken = CrawlJob(id="not-a-uuid", url="http://shop.test/", scraper=batch.jobs.get().scraper)

    result = publish_batch_chord(batch=batch, jobs=[broken])
    payload = wait_batch_completed(receiver, cluster, timeout=30)

    assert result.parent.failed(), "the header task should have failed"
    assert result.state == "FAILURE", "the chord body should not have run"
    assert (payload["data"]["id"], payload["data"]["status"]) == (str(batch.pk), "completed")
    assert payload["data"]["totals"]["succeeded"] == 1
    assert_exactly_one_batch_completed(receiver, batch.pk)
