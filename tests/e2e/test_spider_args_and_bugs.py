"""Spider arguments and the bugs spider teams ship, end to end through a real worker: `args` reach the spider as
keyword arguments (from the API and `manage.py crawl -a`, in the worker and in a package's child); a callback's
NameError shows the spider's file and line in the job's error, `manage.py crawl --wait`, the admin and the log; a
pipeline raising on some items fails the job `spider_error` with its error count, at the default limit."""

from __future__ import annotations

import inspect
import io
import os
import subprocess
import sys

import pytest
from django.conf import settings

from crawls.models import CrawlJob
from items.models import ItemSighting
from registry.models import Scraper, ScraperVersion
from tests import workers
from tests.conftest import wait_for_job
from tests.e2e import packages_stack as packages
from tests.fixtures import spider_bugs

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
package_dirs, package_worker = packages.package_dirs, packages.package_worker  # fixtures
ARGS = {"category": "books", "query": "a b=c"}


def register(name: str, spider: str) -> None:
    scraper = Scraper.objects.create(name=name)
    ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider=spider, is_default=True)


def crawl_command(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`manage.py crawl` as an operator runs it: a process of its own, on the tests' database and Redis."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": workers.test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
    }
    command = [sys.executable, "manage.py", "crawl", *args, "--interval", "0.2", "--timeout", str(timeout - 10)]
    return subprocess.run(command, cwd=workers.BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout)


def items_of(job: CrawlJob) -> list[dict]:
    return [sighting.item.data for sighting in ItemSighting.objects.filter(job_id=job.pk).select_related("item")]


def name_error_line() -> int:
    source, start = inspect.getsourcelines(spider_bugs.NameErrorSpider)
    return start + next(number for number, line in enumerate(source) if "price_of(response)" in line)


def test_a_jobs_args_reach_its_spider_from_the_api_and_the_cli(api, builtins, site, crawl_worker, job_waiter):
    register("args_echo", "tests.fixtures.spider_bugs.ArgsEchoSpider")
    response = api.post(
        "/api/jobs/", {"url": f"{site.url}/index.html", "scraper": "args_echo", "args": ARGS}, format="json"
    )
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"], timeout=60)

    assert job.status == "succeeded", job.error_message
    assert api.get(f"/api/jobs/{job.pk}/").json()["args"] == ARGS
    (item,) = items_of(job)
    assert (item["args"], item["category"]) == (ARGS, "books")

    done = crawl_command(f"{site.url}/list-1.html", "--scraper", "args_echo", "-a", "category=toys", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    job = CrawlJob.objects.get(url=f"{site.url}/list-1.html")
    assert job.args == {"category": "toys"} and items_of(job)[0]["args"] == {"category": "toys"}


def test_a_callbacks_name_error_shows_the_spiders_file_and_line_everywhere(
    api, admin_client, builtins, site, crawl_worker
):
    register("name_error", "tests.fixtures.spider_bugs.NameErrorSpider")
    where = f'spider_bugs.py", line {name_error_line()}, in parse'

    done = crawl_command(f"{site.url}/index.html", "--scraper", "name_error", "--requester", "alice", "--wait")
    job = CrawlJob.objects.get()
    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()

    print(f"\n{job.error_message}")
    assert (job.status, job.error_class) == ("failed", "spider_error"), job.error_message
    assert done.returncode == 1 and where in done.stderr, done.stdout + done.stderr
    assert job.error_message.startswith("spider raised 1 time(s) (1 in callbacks, 0 in item pipelines); first: ")
    assert where in job.error_message and job.error_message.endswith("NameError: name 'price_of' is not defined")
    assert "frames of Scrapy, Twisted and Trawl ...]" in job.error_message
    assert where in log and "Spider error processing" in log, log
    assert where.replace('"', "&quot;") in page
    assert api.get(f"/api/jobs/{job.pk}/").json()["stats"]["errors"] == 1


def test_a_pipeline_raising_on_some_items_fails_the_job_with_its_error_count(api, builtins, site, job_waiter):
    register("choking", "tests.fixtures.spider_bugs.ChokingPipelineSpider")
    response = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "scraper": "choking"}, format="json")
    job = job_waiter(response.json()["id"], timeout=60)
    stats = api.get(f"/api/jobs/{job.pk}/").json()["stats"]

    assert (job.status, job.error_class) == ("failed", "spider_error"), job.error_message
    assert (stats["item_errors"], stats["errors"], stats["items"]) == (65, 65, 55), stats
    assert "65 in item pipelines" in job.error_message and "ValueError: warehouse rejected item 0" in job.error_message
    assert "spider_bugs.py" in job.error_message and "in process_item" in job.error_message


BUGGY_PACKAGE = """
import scrapy


class ArgsEchoSpider(scrapy.Spider):
    name = "packaged_args_echo"

    def parse(self, response):
        yield {"url": response.url, "category": self.category}


class NameErrorSpider(scrapy.Spider):
    name = "packaged_name_error"

    def parse(self, response):
        yield {"price": price_of(response)}
"""


def test_a_packaged_spider_gets_its_args_and_its_name_error_shows_the_packages_file_and_line(
    api, admin_api, builtins, site, package_dirs, package_worker
):
    from tests.packages import wheel_build

    wheel = wheel_build(
        package_dirs["src"],
        name="trawlbugs",
        version="1.0.0",
        files={"trawlbugs/__init__.py": "", "trawlbugs/spiders.py": BUGGY_PACKAGE},
        requires=["scrapy>=2.11"],
    )
    packages.ok(admin_api.post("/api/scrapers/", {"name": "pbugs"}, format="json"), 201)
    for version, spider in (("1.0.0", "ArgsEchoSpider"), ("1.0.1", "NameErrorSpider")):
        handle = io.BytesIO(wheel.read_bytes())
        handle.name = wheel.name
        body = {"version": version, "variant": "stable", "spider": f"trawlbugs.spiders.{spider}", "package": handle}
        packages.ok(admin_api.post("/api/scrapers/pbugs/versions/", body, format="multipart"), 201)
        ready = packages.wait_for(
            lambda version=version: (
                admin_api.get(f"/api/scrapers/pbugs/versions/{version}/").json()["package_status"] != "building"
            ),
            timeout=120,
            what=f"the package of {version}",
            worker=package_worker,
        )
        assert ready

    ran = api.post(
        "/api/jobs/",
        {"url": f"{site.url}/index.html", "scraper": "pbugs", "version": "1.0.0", "args": ARGS},
        format="json",
    )
    job = wait_for_job(ran.json()["id"], timeout=90)
    assert job.status == "succeeded", job.error_message
    assert items_of(job)[0]["category"] == "books"

    spec = {"url": f"{site.url}/index.html", "scraper": "pbugs", "version": "1.0.1"}
    ran = api.post("/api/jobs/", spec, format="json")
    job = wait_for_job(ran.json()["id"], timeout=90)
    line = BUGGY_PACKAGE.splitlines().index('        yield {"price": price_of(response)}') + 1
    assert (job.status, job.error_class) == ("failed", "spider_error"), job.error_message
    assert f'trawlbugs/spiders.py", line {line}, in parse' in job.error_message, job.error_message
    assert job.error_message.endswith("NameError: name 'price_of' is not defined")
