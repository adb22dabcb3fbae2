"""What the packaged-version tests start (tests/e2e/test_packages_*_e2e.py, and tests that reuse it): package
directories, a shop site, a worker given them, and uploading, building and crawling through the API. Wheels are built
here; dependencies come from a local wheel directory with pip's index off, never the internet."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from crawls.models import CrawlJob
from items.models import Item
from tests.callbacks.harness import running_alone
from tests.conftest import wait_for_job
from tests.packages import dep_wheels
from tests.sites import LocalSite, write_catalogue
from tests.workers import Worker

SPIDER = "trawlshop.spiders.ShopSpider"
VERSIONS = "/api/scrapers/pshop/versions/"


@pytest.fixture
def package_dirs(tmp_path):
    """The worker's environments and dependency wheels. Wheels themselves go to the package storage, the (test)
    database by default, which this process and the worker share."""
    dirs = {name: tmp_path / name for name in ("envs", "wheelhouse", "src")}
    dep_wheels(dirs["wheelhouse"])
    return dirs


@pytest.fixture
def shop_site(tmp_path):
    write_catalogue(tmp_path / "site", products=40)
    with LocalSite(tmp_path / "site") as local_site:
        yield local_site


def package_env(package_dirs) -> dict[str, str]:
    return {
        "TRAWL_PACKAGE_CACHE_DIR": str(package_dirs["envs"]),
        "TRAWL_PACKAGE_FIND_LINKS": str(package_dirs["wheelhouse"]),
        "TRAWL_PACKAGE_NO_INDEX": "1",
        # A deprecated version's environment goes once its warm child has idled out (default 120 s).
        "TRAWL_PACKAGE_CHILD_IDLE_SECONDS": "15",
    }


def worker_for_packages(package_dirs, tmp_path, *, concurrency: int = 1) -> Worker:
    return Worker(log_dir=tmp_path, concurrency=concurrency, env=package_env(package_dirs))


@pytest.fixture
def package_worker(package_dirs, redis_server, tmp_path):
    # The session's crawl worker (started by earlier tests) has no package directories: it must not take these jobs.
    with running_alone(worker_for_packages(package_dirs, tmp_path)) as worker:
        yield worker


def ok(response, status=200):
    assert response.status_code == status, response.content
    return response.json()


def upload(ops, wheel: Path, version: str, **fields):
    handle = io.BytesIO(wheel.read_bytes())
    handle.name = wheel.name
    body = {"version": version, "variant": "stable", "spider": SPIDER, "package": handle, **fields}
    return ops.post(VERSIONS, body, format="multipart")


def wait_for(predicate, *, timeout: float, what: str, worker: Worker):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout}s\n--- worker log ---\n{worker.log_tail()}")


def built(ops, version: str, worker: Worker) -> dict:
    def status():
        body = ok(ops.get(f"{VERSIONS}{version}/"))
        return body if body["package_status"] != "building" else None

    return wait_for(status, timeout=120, what=f"package of {version} built", worker=worker)


def crawl(api, site, pages, worker: Worker) -> list[CrawlJob]:
    ids = [
        ok(api.post("/api/jobs/", {"url": f"{site.url}/product-{n}.html", "scraper": "pshop"}, format="json"), 201)[
            "id"
        ]
        for n in pages
    ]
    jobs = []
    for job_id in ids:
        try:
            jobs.append(wait_for_job(job_id, timeout=120))
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{worker.log_tail()}") from None
    return jobs


def outputs(job: CrawlJob) -> tuple[str, str, str, str]:
    item = Item.objects.filter(last_job=job).first()
    assert item is not None, f"job {job.pk} {job.status} {job.error_class}: {job.error_message}"
    return job.version.version, job.status, item.data["output"], item.data["dep"]
