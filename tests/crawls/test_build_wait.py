"""A job claimed while the version it would run is still building waits for the build (scrapyd-deploy, then
schedule.json at once), heeding its cancel, and fails `routing` only once the build failed or the wait's limit
passed. Real database rows and Redis; the build's verdict is recorded as a crawl worker's build records it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.utils import timezone

from crawls.live.cancel import cancel_request
from crawls.models import CrawlJob
from crawls.services.build_wait import BuildWaitStopped, routed_when_built
from crawls.services.execution import version_for
from crawls.timeouts import job_timeout
from project.errors import TrawlError
from registry.models import Package, PackageStatus, Scraper, ScraperVersion
from registry.services import VersionBuilding
from registry.services.packages import version_package_record

pytestmark = pytest.mark.django_db(transaction=True)
POLL = 0.05


@pytest.fixture
def building(requester):
    scraper = Scraper.objects.create(name="books")
    package = Package.objects.create(
        sha256="b" * 64, path=f"{'b' * 64}/books.whl", filename="books.whl", name="books", dist_version="1", size=1
    )
    version = ScraperVersion.objects.create(
        scraper=scraper,
        version="1.0.0+scrapyd.1",
        spider="books.spiders.books.BooksSpider",
        is_default=True,
        package=package,
        package_status=PackageStatus.BUILDING,
    )
    job = CrawlJob.objects.create(
        url="", scraper=scraper, requester=requester, status="running", started_at=timezone.now()
    )
    return job, version


def waiting(job, caplog) -> tuple[threading.Thread, dict]:
    """routed_when_built in a thread of its own (a crawl's task thread), once it is seen waiting."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["version"] = routed_when_built(job, partial(version_for, job=job), poll=POLL)
        except Exception as exc:
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while f"job {job.pk} waits up to" not in caplog.text:
        assert thread.is_alive(), outcome
        assert time.monotonic() < deadline, "the job never waited"
        time.sleep(POLL)
    return thread, outcome


def test_a_job_claimed_while_its_version_builds_runs_it_once_built(building, caplog):
    job, version = building
    with pytest.raises(VersionBuilding):
        version_for(job=job)  # what routing says meanwhile

    caplog.set_level("INFO", logger="trawl.jobs")
    thread, outcome = waiting(job, caplog)
    time.sleep(10 * POLL)
    assert thread.is_alive() and not outcome  # still waiting, not failed

    version_package_record(version_id=version.pk, status=PackageStatus.READY, log="built")
    thread.join(timeout=30)
    assert outcome.get("version") is not None, outcome
    assert outcome["version"].pk == version.pk


def test_a_build_that_fails_ends_the_wait_with_its_reason(building, caplog):
    job, version = building
    caplog.set_level("INFO", logger="trawl.jobs")
    thread, outcome = waiting(job, caplog)

    version_package_record(version_id=version.pk, status=PackageStatus.FAILED, log="pip: no matching distribution")
    thread.join(timeout=30)
    error = outcome.get("error")
    assert isinstance(error, TrawlError) and not isinstance(error, VersionBuilding), outcome
    assert "failed to build: pip: no matching distribution" in error.message


def test_a_job_cancelled_while_it_waits_stops_waiting(building, caplog):
    job, _ = building
    caplog.set_level("INFO", logger="trawl.jobs")
    thread, outcome = waiting(job, caplog)

    cancel_request(job_id=job.pk)
    thread.join(timeout=30)
    assert isinstance(outcome.get("error"), BuildWaitStopped) and outcome["error"].cancelled, outcome


def test_the_wait_ends_with_the_job_s_timeout_saying_how_long_it_waited(building):
    job, _ = building
    # Claimed a timeout less half a second ago: what is left of it bounds the wait.
    job.started_at = timezone.now() - timedelta(seconds=job_timeout(job) - 0.5)

    with pytest.raises(TrawlError) as refused:
        routed_when_built(job, partial(version_for, job=job), poll=POLL)
    assert not isinstance(refused.value, VersionBuilding)
    assert "is still building (waited 0 s for the build)" in refused.value.message or (
        "is still building (waited 1 s for the build)" in refused.value.message
    ), refused.value.message


def test_a_redeploy_that_fails_to_build_gives_the_default_back_and_the_waiting_job_runs_it(building, caplog):
    """As scrapyd keeps running the last good upload: a scrapyd deploy makes its version the default at once, and a
    build that fails hands the default back to the newest version that runs."""
    job, broken = building
    good = ScraperVersion.objects.create(
        scraper=broken.scraper,
        version="0.9.0",
        spider=broken.spider,
        package=broken.package,
        package_status=PackageStatus.READY,
    )
    caplog.set_level("INFO", logger="trawl.jobs")
    thread, outcome = waiting(job, caplog)

    version_package_record(version_id=broken.pk, status=PackageStatus.FAILED, log="spider: cannot import")
    thread.join(timeout=30)
    assert outcome.get("version") is not None and outcome["version"].pk == good.pk, outcome
    good.refresh_from_db()
    broken.refresh_from_db()
    assert good.is_default and not broken.is_default
    assert broken.package_status == PackageStatus.FAILED  # still recorded as it built
