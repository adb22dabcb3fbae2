"""A spider that raises as it starts ends its job `failed` / `spider_error` at once, on its first attempt, with its
own exception and traceback in the job's error and log: never a dead worker, never retried."""

from __future__ import annotations

import time

import pytest

from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from tests.conftest import wait_for_job
from tests.e2e import packages_stack as packages

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
package_dirs, package_worker = packages.package_dirs, packages.package_worker  # fixtures

BROKEN = {
    "bad_init": ("BadInitSpider", "KeyError", "'region'"),
    "bad_start": ("BadStartSpider", "RuntimeError", "token endpoint said 401"),
    "bad_pipeline": ("BadPipelineSpider", "ConnectionError", "warehouse refused the connection"),
    "bad_from_crawler": ("BadFromCrawlerSpider", "ValueError", "API_KEY setting missing"),
}


def register(name: str, spider: str) -> None:
    scraper = Scraper.objects.create(name=name)
    ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider=spider, is_default=True)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_spider_that_raises_as_it_starts_fails_at_once_with_its_traceback(name, api, builtins, site, job_waiter):
    cls, exc_type, message = BROKEN[name]
    register(name, f"tests.fixtures.broken_spiders.{cls}")
    started = time.monotonic()
    response = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "scraper": name}, format="json")
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"], timeout=60)
    took = time.monotonic() - started
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()

    print(f"\n{name}: {job.status}/{job.error_class} at attempt {job.attempt} after {took:.1f}s")
    assert (job.status, job.error_class, job.attempt) == ("failed", "spider_error", 1), job.error_message
    assert exc_type in job.error_message and message in job.error_message, job.error_message
    assert "Traceback (most recent call last)" in job.error_message, job.error_message
    assert "broken_spiders.py" in job.error_message  # the spider's own frame, not Trawl's
    assert f"{exc_type}" in log and "Traceback (most recent call last)" in log, log
    assert "Crawler.stats is not set" not in log


def test_a_version_whose_spider_cannot_be_imported_is_a_spider_error_not_routing(api, builtins, site, job_waiter):
    register("gone", "tests.fixtures.broken_spiders.NoSuchSpider")
    response = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "scraper": "gone"}, format="json")
    job = job_waiter(response.json()["id"], timeout=60)

    assert (job.status, job.error_class, job.attempt) == ("failed", "spider_error", 1), job.error_message
    assert "cannot import" in job.error_message and "NoSuchSpider" in job.error_message


def test_cancelling_a_job_whose_spider_failed_to_start_changes_nothing(api, builtins, site, job_waiter):
    register("bad_init", "tests.fixtures.broken_spiders.BadInitSpider")
    response = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "scraper": "bad_init"}, format="json")
    job = job_waiter(response.json()["id"], timeout=60)
    cancel = api.post(f"/api/jobs/{job.pk}/cancel/")

    assert cancel.status_code == 409, cancel.content  # already final: nothing to cancel, and it says so at once
    assert CrawlJob.objects.get(pk=job.pk).error_class == "spider_error"


BROKEN_PACKAGE = """
import scrapy


class BadInitSpider(scrapy.Spider):
    name = "packaged_bad_init"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.region = kwargs["options"]["region"]  # KeyError: the job's options have no region
"""


def test_a_packaged_spider_that_raises_as_it_starts_fails_at_once_with_the_childs_traceback(
    api, admin_api, builtins, site, package_dirs, package_worker
):
    """The same in a package's child process: its traceback reaches the job's error and the parent's job log."""
    from tests.packages import wheel_build

    wheel = wheel_build(
        package_dirs["src"],
        name="trawlbroken",
        version="1.0.0",
        files={"trawlbroken/__init__.py": "", "trawlbroken/spiders.py": BROKEN_PACKAGE},
        requires=["scrapy>=2.11"],
    )
    packages.ok(admin_api.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    uploaded = packages.upload(admin_api, wheel, "1.0.0", spider="trawlbroken.spiders.BadInitSpider", is_default=True)
    packages.ok(uploaded, 201)
    assert packages.built(admin_api, "1.0.0", package_worker)["package_status"] == "ready"

    response = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "scraper": "pshop"}, format="json")
    job = wait_for_job(response.json()["id"], timeout=60)
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()

    assert (job.status, job.error_class, job.attempt) == ("failed", "spider_error", 1), job.error_message
    assert "KeyError: 'region'" in job.error_message and "Traceback (most recent call last)" in job.error_message
    assert "trawlbroken/spiders.py" in job.error_message  # the package's own frame
    assert "KeyError" in log and "trawlbroken/spiders.py" in log, log
