"""Fair share end to end: a real worker, a 500-job backlog of one requester, ten jobs of another at its priority."""

from __future__ import annotations

import time

import pytest

from access.models import Requester
from crawls.models import CrawlJob
from tests.callbacks.harness import running_alone
from tests.clients import client_for
from tests.e2e.test_throttle_e2e import StampedSite
from tests.throttling.buckets_helpers import flush_throttle_keys
from tests.workers import Worker
from throttling.models import DomainThrottle
from throttling.services import throttle_create, throttle_delete

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BACKLOG = 500
LATE = 10


@pytest.fixture
def worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    worker = Worker(queues="crawls,control", concurrency=2, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


@pytest.fixture
def fast_localhost():
    flush_throttle_keys()
    throttle_create(domain="localhost", rate=1000, burst=1000, ip_rate=1000, ip_burst=1000, adaptive=False)
    yield
    for throttle in DomainThrottle.objects.filter(domain="localhost"):
        throttle_delete(throttle=throttle)
    flush_throttle_keys()


def wait_until(predicate, *, timeout: float, why: str, worker: Worker) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{why}\n--- worker log ---\n{worker.log_tail()}"
        time.sleep(0.2)


def started(name: str) -> list[CrawlJob]:
    return list(CrawlJob.objects.filter(requester__name=name, started_at__isnull=False).order_by("started_at"))


def test_a_late_requesters_jobs_start_before_a_big_backlog_drains(builtins, worker, fast_localhost):
    big, late = client_for("backlog-owner"), client_for("late-comer")
    Requester.objects.filter(name="backlog-owner").update(max_active_jobs=BACKLOG)
    with StampedSite() as site:
        specs = [{"url": f"{site.url}/a/{n}", "options": {"maxdepth": 0}} for n in range(BACKLOG)]
        batch = big.post("/api/batches/", {"jobs": specs}, format="json")
        assert batch.status_code == 201, batch.content
        refused = big.post("/api/jobs/", {"url": f"{site.url}/a/x"}, format="json")
        assert refused.status_code == 429 and "at most 500" in refused.json()["detail"]

        wait_until(
            lambda: len(started("backlog-owner")) >= 6, timeout=120, why="the backlog never started", worker=worker
        )
        late_specs = [{"url": f"{site.url}/b/{n}", "options": {"maxdepth": 0}} for n in range(LATE)]
        submitted = late.post("/api/batches/", {"jobs": late_specs}, format="json")
        assert submitted.status_code == 201, submitted.content
        since = CrawlJob.objects.filter(requester__name="late-comer").earliest("queued_at").queued_at
        wait_until(
            lambda: len(started("late-comer")) == LATE, timeout=180, why="late jobs never all ran", worker=worker
        )
        big.delete(f"/api/batches/{batch.json()['id']}/")

    late_starts = [job.started_at for job in started("late-comer")]
    backlog_starts = [job.started_at for job in started("backlog-owner") if job.started_at > since]
    slots = sorted([*late_starts, *backlog_starts])
    positions = [slots.index(at) + 1 for at in late_starts]
    before_last = [job for job in started("backlog-owner") if job.started_at < max(late_starts)]
    print(f"late jobs took slots {positions} of the {len(slots)} started after they were submitted; ")
    print(f"{len(before_last)} of the backlog's {BACKLOG} jobs had started by the last late one")
    assert len(before_last) < BACKLOG / 10, "the late jobs should not wait for the backlog to drain"
    assert sum(1 for position in positions if position <= 2 * LATE + 2) >= 8, positions
