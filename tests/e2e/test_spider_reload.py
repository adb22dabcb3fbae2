"""Development (`make run` sets TRAWL_SPIDER_RELOAD=1): an edited spider module is used by the next job, without
restarting the worker that already imported it. Production settings turn it off."""

from __future__ import annotations

import os
import time

import pytest

from crawls.models import CrawlJob
from items.models import Item
from registry.models import Scraper, ScraperVersion
from tests.callbacks.harness import running_alone
from tests.conftest import wait_for_job
from tests.workers import BASE_DIR, Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SPIDER = """
import scrapy


class EditedSpider(scrapy.Spider):
    name = "edited"

    def parse(self, response):
        yield {{"url": response.url, "output": {output!r}}}
"""


def write_module(path, output: str) -> None:
    path.write_text(SPIDER.format(output=output))
    later = time.time() + 2  # a new mtime even within the filesystem's timestamp granularity
    os.utime(path, (later, later))


def run(api, url: str) -> CrawlJob:
    response = api.post("/api/jobs/", {"url": url, "scraper": "edited"}, format="json")
    assert response.status_code == 201, response.content
    return wait_for_job(response.json()["id"], timeout=60)


@pytest.mark.parametrize("reload", ["1", "0"])
def test_an_edited_spider_module_is_used_by_the_next_job_when_reload_is_on(reload, api, builtins, site, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    module = code / "edited_spiders.py"
    write_module(module, "first")
    scraper = Scraper.objects.create(name="edited")
    ScraperVersion.objects.create(
        scraper=scraper, version="1.0.0", spider="edited_spiders.EditedSpider", is_default=True
    )
    env = {"TRAWL_SPIDER_RELOAD": reload, "PYTHONPATH": f"{code}{os.pathsep}{BASE_DIR}"}
    with running_alone(Worker(queues="crawls", concurrency=1, env=env, log_dir=tmp_path)):
        first = run(api, f"{site.url}/product-1.html")
        write_module(module, "second")
        second = run(api, f"{site.url}/product-1.html")

    assert (first.status, second.status) == ("succeeded", "succeeded"), (first.error_message, second.error_message)
    outputs = [Item.objects.get(last_job=job).data["output"] for job in (second,)]
    expected = "second" if reload == "1" else "first"  # without reload the worker keeps the module it imported
    assert outputs == [expected]
