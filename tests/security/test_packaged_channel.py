"""A packaged version's child floods its message channel to the worker.

The author of a wheel an admin uploaded in good faith: its spider writes straight into the channel its child reports
on (the file descriptor in TRAWL_CHILD_FD) one line of 160 MB, then logs 1,000 records under 1,000 logger names,
then yields its item. The worker process reading that channel must stay bounded — its resident memory grows by less
than the line, and the records come under at most LOGGER_NAMES_MAX + 1 logger names — and the job still ends
`succeeded` with its item, the dropped line counted in its log. Through a real worker with `make run`'s settings and
the production settings.
"""

from __future__ import annotations

import threading

import psutil
import pytest

from crawls.models import CrawlJob
from items.models import Item
from runtime.packaged.channel import LOGGER_NAMES_MAX
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.packages import wheel_build
from tests.security.test_packaged_frontier import packaged_worker
from tests.security.test_packaged_secrets import (
    attacker_site,
    built,
    child_users_swept,
    package_dirs,
    upload,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["attacker_site", "child_users_swept", "package_dirs", "packaged_worker"]  # fixtures
LINE_BYTES = 160 * 1024 * 1024
NAMES = 1000

FLOODING_SPIDER = f"""
import logging
import os

import scrapy


class FloodingSpider(scrapy.Spider):
    name = "flooding"

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        channel = int(os.environ["TRAWL_CHILD_FD"])
        line = b'{{"t": "log", "d": {{"msg": "' + b"x" * {LINE_BYTES} + b'"}}}}\\n'
        view = memoryview(line)
        while view:
            view = view[os.write(channel, view):]
        del line, view
        for n in range({NAMES}):
            logging.getLogger(f"flood.n{{n}}").warning("flood %s", n)
        yield {{"url": response.url, "title": response.css("h1::text").get()}}
"""


class PeakRss:
    """Samples one process's resident memory on a thread until stopped; `peak` is the largest seen."""

    def __init__(self, pid: int) -> None:
        self.process, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()
        self.start = self.process.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(0.02):
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.NoSuchProcess:
                return

    def growth(self) -> int:
        self.stop.set()
        self.thread.join(5)
        return self.peak - self.start


def test_a_flooded_channel_keeps_the_worker_bounded_and_the_job_ends(
    packaged_worker, package_dirs, attacker_site, api, mode
):
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    files = {"flooder/__init__.py": "", "flooder/spiders.py": FLOODING_SPIDER}
    wheel = wheel_build(package_dirs["src"], name="flooder", version="1.0.0", files=files)
    created = upload(ops, wheel, "1.0.0", "flooder.spiders.FloodingSpider", is_default="true")
    assert created.status_code == 201, created.content
    assert built(ops, "1.0.0", packaged_worker)["package_status"] == "ready"

    # The pool process that will read the channel: the worker's only one (concurrency 1), sampled from before the job.
    [pool_pid] = packaged_worker.pool_pids()
    rss = PeakRss(pool_pid)
    submitted = api.post("/api/jobs/", {"url": f"{attacker_site}/index.html", "scraper": "psecrets"}, format="json")
    assert submitted.status_code == 201, submitted.content
    job = wait_for_job(submitted.json()["id"], timeout=240)
    packaged_worker.wait_idle()
    growth = rss.growth()

    log = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    names = {line.split()[2] for line in log.splitlines() if " flood " in line and len(line.split()) > 2}
    print(
        f"[{mode}] pool RSS growth {growth / 2**20:.0f} MiB for a {LINE_BYTES / 2**20:.0f} MiB line; "
        f"{len(names)} logger names for {NAMES} sent; job {job.status}"
    )
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{packaged_worker.log_tail(80)}"
    assert CrawlJob.objects.get(pk=job.pk).worker.endswith(f"/{pool_pid}"), "another process read the channel"
    assert Item.objects.filter(last_job=job).count() == 1
    assert growth < LINE_BYTES / 2, f"the worker grew by {growth / 2**20:.0f} MiB reading one line"
    assert len(names) <= LOGGER_NAMES_MAX + 1 and "trawl.package" in names, sorted(names)[:5]
    assert "messages too long or not JSON: dropped" in log, log[-2000:]
