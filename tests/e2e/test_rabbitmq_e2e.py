"""RabbitMQ as the broker, end to end: queue depths read through AMQP, priorities served the right way round, a job
run and a running job cancelled (tests/e2e/test_crawl_jobs.py on Redis), and fair share (the Redis run of the same
test is tests/e2e/test_fairshare_e2e.py; the queue-depth test on Redis is tests/ops/test_apis.py). Trawl's state
stays on the session's Redis; see tests/e2e/rabbitmq.py."""

from __future__ import annotations

import json
import time

import pytest

from crawls.models import CrawlJob
from crawls.publish import RUN_CRAWL
from project.celery import app
from project.messaging.messages import broker_priority
from tests.callbacks.harness import running_alone
from tests.e2e.rabbitmq import VHOST, on_rabbitmq, purge, rabbitmqctl
from tests.e2e.test_crawl_jobs import test_rest_job_succeeds_with_expected_items, test_running_job_can_be_cancelled
from tests.e2e.test_fairshare_e2e import fast_localhost, test_a_late_requesters_jobs_start_before_a_big_backlog_drains
from tests.ops.test_apis import metric_samples
from tests.workers import ONE_CRAWL_PER_PROCESS, Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = [
    "fast_localhost",
    "on_rabbitmq",
    "test_a_late_requesters_jobs_start_before_a_big_backlog_drains",
    "test_rest_job_succeeds_with_expected_items",
    "test_running_job_can_be_cancelled",
]

LOW = 50

# The order and fair-share tests here run their workers with ONE_CRAWL_PER_PROCESS, prefork semantics: a slot is a
# process (several crawls per process take as many messages at once and start them together, their order then their
# claims' race). The Redis broker's fair-share test (tests/e2e/test_fairshare_e2e.py) runs at the default.


@pytest.fixture(autouse=True)
def empty_queues():
    """Each test starts on empty queues: the fair-share test (collected first) leaves its cancelled backlog's
    messages, which would count in the depths and take the priority test's worker slot."""
    purge("crawls", "control", "callbacks")
    yield
    purge("crawls", "control", "callbacks")


@pytest.fixture
def crawl_worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """The crawl worker `job_waiter` waits on, on RabbitMQ and for one test only: one that outlived its test would
    take the jobs the priority test queues before its own worker starts."""
    worker = Worker(log_dir=tmp_path)
    with running_alone(worker):
        yield worker


@pytest.fixture
def worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """The fair-share test's worker (its own fixture of the same name runs it on the session's broker)."""
    worker = Worker(queues="crawls,control", concurrency=2, env=ONE_CRAWL_PER_PROCESS, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def test_queue_depths_come_from_rabbitmq_in_stats_metrics_and_the_dashboard(
    admin_api, admin_client, client, admin_auth
):
    for step in (0, 9):  # messages nobody consumes (no worker runs yet in this module's vhost)
        for _ in range(3 if step else 2):
            app.send_task(RUN_CRAWL, args=["00000000-0000-0000-0000-000000000000", 1], queue="crawls", priority=step)
    queues = admin_api.get("/api/stats/").json()["queues"]
    metrics = metric_samples(client.get("/metrics", HTTP_AUTHORIZATION=admin_auth).content.decode())
    dashboard = admin_client.get("/admin/ops/dashboard/data/").json()["queue_depth"]["now"]

    assert queues["queues"]["crawls"] == {"total": 5, "steps": {}}
    assert queues["queues"]["control"]["total"] == 0 and queues["unacked"] is None  # AMQP does not tell it
    assert metrics[("trawl_queue_depth", (("queue", "crawls"),))] == 5
    assert not any(name == "trawl_queue_unacked_messages" for name, _ in metrics)
    assert dashboard["queues"]["crawls"]["total"] == 5
    declared = rabbitmqctl("list_queues", "-p", VHOST, "name", "arguments", "--formatter", "json")
    arguments = {queue["name"]: queue["arguments"] for queue in json.loads(declared.stdout)}
    for name in ("crawls", "control", "callbacks"):
        assert arguments[name] == [["x-max-priority", "signedint", 9]], arguments


def test_a_queue_nobody_declared_reads_empty_and_the_others_still_answer(monkeypatch):
    from ops import queues

    monkeypatch.setattr(queues, "broker_queues", lambda: ["crawls", "trawl-never-declared", "control"])
    app.send_task(RUN_CRAWL, args=["00000000-0000-0000-0000-000000000000", 1], queue="control")

    depths = queues.queue_depths()  # the 404 closes the AMQP channel: the next queue is asked on a new one

    assert {name: depth["total"] for name, depth in depths["queues"].items()} == {
        "crawls": 0,
        "trawl-never-declared": 0,
        "control": 1,
    }


def test_healthz_checks_the_broker_apart_from_redis(client):
    body = client.get("/healthz").json()
    assert (body["broker"], body["redis"], body["status"]) == ("ok", "ok", "ok")


def test_a_priority_100_job_starts_before_the_queued_priority_1_jobs(api, builtins, site, tmp_path):
    assert (broker_priority(1), broker_priority(100)) == (0, 9)  # RabbitMQ serves the highest number first
    url = f"{site.url}/"
    low = [
        api.post("/api/jobs/", {"url": url, "priority": 1, "options": {"maxdepth": 0}}, format="json")
        for _ in range(LOW)
    ]
    assert all(response.status_code == 201 for response in low), low[0].content
    urgent = api.post("/api/jobs/", {"url": url, "priority": 100, "options": {"maxdepth": 0}}, format="json")
    assert urgent.status_code == 201, urgent.content

    # One slot, started after they queued. Several crawls per process would take as many messages at once and start
    # them together: the order this test reads is RabbitMQ's, not the race between their claims.
    worker = Worker(queues="crawls,control", concurrency=1, env=ONE_CRAWL_PER_PROCESS, log_dir=tmp_path)
    with running_alone(worker):
        deadline = time.monotonic() + 180
        while CrawlJob.objects.filter(started_at__isnull=False).count() < 4:
            assert time.monotonic() < deadline, f"jobs never started\n{worker.log_tail()}"
            time.sleep(0.2)
        order = list(
            CrawlJob.objects.filter(started_at__isnull=False).order_by("started_at").values_list("priority", flat=True)
        )
        CrawlJob.objects.filter(status="queued").update(status="cancelled")  # the rest need not run

    print(f"start order of the first {len(order)} jobs by priority: {order}")
    assert order[0] == 100, order
