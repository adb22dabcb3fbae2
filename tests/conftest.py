from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from project.redis.server import redis_start_if_absent
from tests.parallel import UnitScheduling, units_order
from tests.sites import LocalSite, write_catalogue
from tests.workers import Worker

_STARTED_REDIS = pytest.StashKey[subprocess.Popen | None]()


def pytest_configure(config: pytest.Config) -> None:
    """Real Redis: the one at REDIS_URL, or one the run starts from the pip-shipped binary and stops at the end. Under
    pytest-xdist the controlling process starts it before its workers exist: they share one server (each on its own
    database) instead of racing to start one each and stopping it under the others."""
    if hasattr(config, "workerinput"):
        return
    log = Path(tempfile.gettempdir()) / f"trawl-test-redis-{os.getpid()}.log"
    config.stash[_STARTED_REDIS] = redis_start_if_absent(settings.REDIS_URL, log_path=str(log))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker; a serial run keeps the files' order
        units_order(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile` (make test): whole files, the RabbitMQ ones together, slowest first (tests/parallel.py)."""
    return UnitScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_STARTED_REDIS, None)
    if server is not None:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory):
    """A real 3-master Redis Cluster for the session (tests/redis_cluster.py), started on first use."""
    from tests.redis_cluster import cluster_binaries, redis_cluster

    if cluster_binaries() is None:
        pytest.skip("redis-server and redis-cli are needed on PATH to start a Redis Cluster")
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """The Redis URL this test process uses (its own database under pytest-xdist: tests/settings.py)."""
    return settings.REDIS_URL


@pytest.fixture
def throttle_keys_clean():
    """Throttle rules and buckets left in Redis by one test must not slow or block the next."""
    from tests.throttling.buckets_helpers import flush_throttle_keys

    flush_throttle_keys()
    yield
    flush_throttle_keys()


@pytest.fixture
def builtins(db):
    from registry.builtins import builtins_ensure

    builtins_ensure()


@pytest.fixture
def requester(db):
    from access.services import token_issue

    owner, token = token_issue(requester_name="alice")
    owner.plain_token = token
    return owner


@pytest.fixture
def admin_auth(db) -> str:
    """An `Authorization` header value with an admin token: what /metrics and broadcasts to workers need."""
    from access.services import token_issue

    _, token = token_issue(requester_name="root", admin=True)
    return f"Token {token}"


@pytest.fixture
def admin_api(admin_auth):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=admin_auth)
    return client


@pytest.fixture
def api(requester):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {requester.plain_token}")
    return client


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    write_catalogue(root)
    with LocalSite(root) as local_site:
        yield local_site


@pytest.fixture(scope="session")
def crawl_worker(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    """One real `celery worker` process (concurrency 1) for the whole session."""
    worker = Worker(log_dir=tmp_path_factory.mktemp("workers"))
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()


def wait_for_job(
    job_id, *, timeout: float = 90, statuses=("succeeded", "failed", "cancelled", "dead"), log: Callable[[], str] = str
):
    """The job once it reached one of `statuses`; past `timeout`, fails with its stats and `log()` (a worker's tail)."""
    from crawls.models import CrawlJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if job.status in statuses:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status} after {timeout}s; stats {job.stats}\n{log()}")


@pytest.fixture
def job_waiter(crawl_worker):
    def wait(job_id, **kwargs):
        try:
            return wait_for_job(job_id, **kwargs)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{crawl_worker.log_tail()}") from None

    yield wait
    crawl_worker.wait_idle()


class SentTasks(list):
    """Work Trawl published, as (task name, args, kwargs, options), recorded instead of sent to the broker.

    `inline[name] = fn` runs that task's service right away instead (e.g. batch finalization), as a worker would."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: dict = {}

    def record(self, work, **options) -> None:
        from celery import chord

        for sig in [*work.tasks, work.body] if isinstance(work, chord) else [work]:
            self.append((sig.task, tuple(sig.args), dict(sig.kwargs), {**sig.options, **options}))
            if sig.task in self.inline:
                self.inline[sig.task](*sig.args)

    def args_of(self, name: str) -> list[tuple]:
        return [args for task, args, _kwargs, _options in self if task == name]


@pytest.fixture
def sent_tasks(monkeypatch) -> SentTasks:
    """Everything a publish module would send, recorded (project.messaging.messages.send is the one point that reaches
    Celery)."""
    sent = SentTasks()
    monkeypatch.setattr("project.messaging.messages.send", sent.record)
    return sent
