"""Operating Trawl with real workers: job logs, alerts, watchdogs, retention and feeds, end to end."""

from __future__ import annotations

import json
import socket
import time
from io import StringIO

import pytest
from django.core.management import call_command

from callbacks.models import Delivery
from callbacks.signing import signature_verify
from crawls.logs.joblog import job_log_forget
from crawls.models import CrawlJob, JobLog
from items.models import Item
from project.redis import get_redis, redis_key
from registry.models import Scraper, ScraperVersion
from sources.models import Source
from tests.callbacks.harness import Receiver, exclusive, kill_hard, running_alone
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.ops.site import TroubleSite
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
STALL_SECONDS = 3  # the worker's TRAWL_STALL_SECONDS; the default (600) is checked in tests/ops/test_retention.py


@pytest.fixture(scope="module")
def ops_worker(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    """A worker whose pool process is replaced after every task, with a short stall limit; the only one consuming."""
    worker = Worker(
        log_dir=tmp_path_factory.mktemp("ops-workers"),
        env={"TRAWL_STALL_SECONDS": str(STALL_SECONDS), "TRAWL_WORKER_MAX_TASKS_PER_CHILD": "1"},
    )
    with running_alone(worker):
        yield worker


@pytest.fixture
def waiter(ops_worker, throttle_keys_clean):
    def wait(job_id, **kwargs):
        try:
            return wait_for_job(job_id, timeout=120, **kwargs)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{ops_worker.log_tail()}") from None

    return wait


@pytest.fixture
def trouble():
    with TroubleSite() as site:
        yield site


def version(name: str, *, spider: str = "runtime.spiders.link.LinkSpider", **settings) -> ScraperVersion:
    scraper = Scraper.objects.create(name=name)
    return ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider=spider, is_default=True, **settings)


def submit(api, **spec) -> str:
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def log_of(api, job_id: str, **params) -> str:
    response = api.get(f"/api/jobs/{job_id}/log/", params)
    assert response.status_code == 200, response.content
    return response.content.decode()


def logs_stored(jobs: list, *, timeout: float = 10) -> int:
    """How many of these jobs' logs reached the database: each is stored just after its job's end is recorded."""
    deadline = time.monotonic() + timeout
    while JobLog.objects.filter(job__in=jobs).count() < len(jobs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return JobLog.objects.filter(job__in=jobs).count()


def test_job_log_is_readable_while_running_and_after_the_worker_process_is_recycled(api, builtins, site, waiter):
    version("chatty", spider="tests.ops.spiders.ChattySpider", settings={"CONCURRENT_REQUESTS": 1})
    job_id = submit(api, url=f"{site.url}/slow/0", scraper="chatty", options={"maxdepth": 20})
    waiter(job_id, statuses=("running",))

    deadline, running_log = time.monotonic() + 60, ""
    while "chatty parsed" not in running_log and time.monotonic() < deadline:
        running_log = log_of(api, job_id)
        time.sleep(0.3)
    still_running = CrawlJob.objects.get(pk=job_id).status == "running"
    api.post(f"/api/jobs/{job_id}/cancel/")
    waiter(job_id)

    assert still_running and "chatty parsed" in running_log, running_log
    # The end's follow-up logs `job finish` just after the final state is committed: a read in between (a CI run
    # did) sees the log without its last line. The log read once that line is in must be the log that is stored.
    deadline, after = time.monotonic() + 10, ""
    while " INFO trawl.jobs job finish id=" not in after and time.monotonic() < deadline:
        after = log_of(api, job_id)
        time.sleep(0.1)
    assert f" INFO trawl.jobs job finish id={job_id} " in after, after[-2000:]
    assert " INFO scrapy.core.engine Spider opened" in after
    assert " INFO trawl.jobs job start id=" in after
    assert f"INFO chatty chatty parsed {site.url}/slow/0" in after
    assert logs_stored([job_id]) == 1
    assert log_of(api, job_id) == after
    assert not get_redis().exists(redis_key("joblog", job_id, 1, 0, "head")), "the stored log stays in Redis"
    assert log_of(api, job_id, level="WARNING").count(" INFO ") == 0
    assert client_for("mallory").get(f"/api/jobs/{job_id}/log/").status_code == 404


def test_log_survives_the_pool_process_that_wrote_it(api, builtins, site, waiter, ops_worker):
    job = waiter(submit(api, url=f"{site.url}/product-1.html"))
    writer = int(job.worker.rsplit("/", 1)[1])
    deadline = time.monotonic() + 30
    while writer in ops_worker.pool_pids() and time.monotonic() < deadline:
        time.sleep(0.2)

    assert writer not in ops_worker.pool_pids(), "the pool process was not recycled"
    assert " INFO scrapy.core.engine Spider opened" in log_of(api, str(job.pk))


def test_log_of_a_worker_killed_mid_crawl_stays_readable(api, builtins, site, waiter, tmp_path):
    version("chatty", spider="tests.ops.spiders.ChattySpider", settings={"CONCURRENT_REQUESTS": 1})
    victim = Worker(log_dir=tmp_path).start()
    try:
        with exclusive(victim):
            job_id = submit(api, url=f"{site.url}/slow/0", scraper="chatty", options={"maxdepth": 20})
            deadline, seen = time.monotonic() + 90, ""
            while seen.count("chatty parsed") < 2 and time.monotonic() < deadline:
                seen = log_of(api, job_id)
                time.sleep(0.3)
            kill_hard(victim)
        after = log_of(api, job_id)
    finally:
        victim.stop()
        job_log_forget(jobs=[(job_id, 1)])

    assert seen.count("chatty parsed") >= 2, victim.log_tail()
    assert after.startswith(seen), "records written before the kill were lost"
    assert CrawlJob.objects.get(pk=job_id).status == "running"  # the reaper, not running here, would requeue it


def test_min_items_monitor_sends_one_signed_job_alert(api, builtins, site, waiter, requester):
    version("one_item", settings={"TRAWL_MONITORS": {"min_items": 100}})
    with Receiver() as receiver:
        job_id = submit(api, url=f"{site.url}/product-1.html", scraper="one_item", callback_url=receiver.url)
        job = waiter(job_id)
        receiver.wait_for(lambda r: r.events("job.alert") and r.events("job.completed"), timeout=60, why="alert")
        time.sleep(1)
        alerts = receiver.events("job.alert")

    assert job.status == "succeeded"
    expected = [{"monitor": "min_items", "expected": 100, "actual": 1}]
    assert api.get(f"/api/jobs/{job_id}/").json()["alerts"] == expected
    assert len(alerts) == 1
    body = alerts[0].json
    assert (body["event"], body["data"]["id"], body["data"]["alerts"]) == ("job.alert", job_id, expected)
    assert alerts[0].headers["X-Trawl-Delivery"] == body["id"]
    assert signature_verify(
        secret=requester.webhook_secret, body=alerts[0].body, header=alerts[0].headers["X-Trawl-Signature"]
    )
    assert Delivery.objects.filter(job_id=job_id, event="job.alert").count() == 1


def test_max_error_rate_stops_a_crawl_of_a_failing_site_early(api, builtins, trouble, waiter):
    version("fragile", settings={"TRAWL_MONITORS": {"max_error_rate": 0.5}, "RETRY_TIMES": 0})

    job = waiter(submit(api, url=f"{trouble.url}/broken", scraper="fragile", options={"maxdepth": 1}))

    assert (job.status, job.error_class) == ("failed", "monitor"), job.error_message
    assert "stopped early" in job.error_message
    assert trouble.hits["error"] < 100, f"{trouble.hits['error']} of 200 failing pages fetched: not stopped early"
    assert job.alerts[0]["monitor"] == "max_error_rate" and job.alerts[0]["actual"] > 0.5


def test_a_crawl_of_a_site_that_stops_answering_ends_stalled(api, builtins, trouble, waiter):
    version("patient", settings={"DOWNLOAD_TIMEOUT": 15, "RETRY_TIMES": 0})

    job = waiter(submit(api, url=f"{trouble.url}/stalls", scraper="patient", options={"maxdepth": 1}))

    assert (job.status, job.error_class) == ("failed", "stalled"), (job.error_message, job.stats, job.worker)
    assert f"no response and no item for {STALL_SECONDS}" in job.error_message
    assert trouble.hits["hang"] == 1


def test_a_spider_opened_handler_that_blocks_is_not_a_stall(api, builtins, site, waiter):
    version(
        "slow-to-open",
        settings={
            "EXTENSIONS": {"tests.ops.spiders.SlowToOpen": 0},
            "TRAWL_SLOW_OPEN_SECONDS": STALL_SECONDS + 1,
        },
    )

    job = waiter(submit(api, url=f"{site.url}/index.html", scraper="slow-to-open", options={"maxdepth": 1}))

    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert job.stats["items"] == 2


def test_cleanup_days_zero_keeps_items_and_each_sources_last_job(api, builtins, site, waiter):
    admin = client_for("ops", admin=True)
    source = Source.objects.create(url=f"{site.url}/product-3.html", scraper=Scraper.objects.get(name="link"))
    source_jobs = []
    for _ in range(2):
        response = admin.post(f"/api/sources/{source.pk}/crawl/")
        assert response.status_code == 202, response.content
        source_jobs.append(waiter(response.json()["id"]))
    adhoc = waiter(submit(api, url=f"{site.url}/product-4.html"))
    items_before = Item.objects.count()
    assert logs_stored([*source_jobs, adhoc]) == 3

    out = StringIO()
    call_command("trawl_cleanup", "--days", "0", stdout=out)

    assert set(CrawlJob.objects.values_list("pk", flat=True)) == {source_jobs[-1].pk}
    assert Item.objects.count() == items_before > 0
    assert list(JobLog.objects.values_list("job_id", flat=True)) == [source_jobs[-1].pk]
    assert api.get(f"/api/jobs/{adhoc.pk}/log/").status_code == 404
    assert "removed (finished more than 0 days ago): 2 jobs, 2 logs" in out.getvalue()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def s3():
    """moto's S3 server on a free local port (never the internet), with an empty bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="trawl-feeds")
        yield endpoint, client
    finally:
        server.stop()


def test_feeds_to_s3_leave_the_jobs_items_in_the_bucket(api, builtins, site, waiter, s3):
    endpoint, client = s3
    version(
        "exporter",
        settings={
            "FEEDS": {"s3://trawl-feeds/%(scraper)s/%(version)s/%(job_id)s.jsonl": {"format": "jsonlines"}},
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_REGION_NAME": "us-east-1",
        },
    )

    job = waiter(submit(api, url=f"{site.url}/index.html", scraper="exporter", options={"maxdepth": 1}))

    assert job.status == "succeeded", job.error_message
    body = client.get_object(Bucket="trawl-feeds", Key=f"exporter/1.0.0/{job.pk}.jsonl")["Body"].read()
    rows = [json.loads(line) for line in body.decode().splitlines()]
    assert len(rows) == job.stats["items"] == 2
    assert {row["url"] for row in rows} == {f"{site.url}/index.html", f"{site.url}/list-1.html"}
    assert "testing" not in api.get(f"/api/jobs/{job.pk}/log/").content.decode()


def test_crawl_wait_log_streams_the_job_log_under_the_progress(builtins, site, waiter):
    from tests.e2e.test_crawl_command import crawl

    done = crawl(f"{site.url}/product-5.html", "--wait", "--log")

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    opened = next(n for n, line in enumerate(lines) if line.endswith(" INFO scrapy.core.engine Spider opened"))
    closed = next(n for n, line in enumerate(lines) if "Spider closed (finished)" in line)
    assert 0 < opened < closed < len(lines) - 1
    dump = next(
        n for n, line in enumerate(lines) if line.endswith(" INFO scrapy.statscollectors Dumping Scrapy stats:")
    )
    head = lines[dump].removesuffix(" Dumping Scrapy stats:")
    assert lines[dump + 1].startswith(f"{head} | {{") and lines[dump + 2].startswith(f"{head} |  '"), lines[dump:]
    assert not any("\\n" in line for line in lines)  # a multi-line record is printed on its own lines
    assert lines[-1].startswith(f"job {CrawlJob.objects.get().pk} succeeded in ")
    assert len(set(lines)) == len(lines), "a record was printed twice"
