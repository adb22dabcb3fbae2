"""A packaged version's child writes its job's frontier; the job's next attempt may run in a worker process itself.

The author of a wheel an admin uploaded in good faith: its spider, in its child process, writes requests into its
job's frontier (its Redis user may) that run code when unpickled — the pickle the frontier used to hold, with a
`__reduce__` that writes a marker file from any process that is not a package child — and a forged one naming
another class. It then kills its parent (the worker's pool process: same OS user) and itself, so the job gets
another attempt with the entries still queued.
The admin has meanwhile sent the scraper's traffic to a version installed in the worker, so the next attempt crawls
in-process, from that frontier, with the worker's secrets. Nothing written there may run: no marker, the entries
refused and counted in that attempt's log, the job ends `succeeded`. Through a real worker with `make run`'s settings
and the production settings; the reaper's pass is run by the test once the killed attempt's heartbeat is stale.
"""

from __future__ import annotations

import os
import time

import pytest

from crawls.models import CrawlJob
from crawls.services.reaper import jobs_reap
from crawls.services.shards import job_frontier
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.packages import wheel_build
from tests.security.test_packaged_secrets import (
    VERSIONS,
    attacker_site,
    built,
    child_users_swept,
    package_dirs,
    upload,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["attacker_site", "child_users_swept", "package_dirs"]  # fixtures

PLANTING_SPIDER = """
import json
import os
import pickle
import signal

import scrapy

MARKER = {marker!r}
# Run by whoever unpickles it; writes the marker only outside a package child (TRAWL_CHILD_FD is the child's channel).
CODE = f"import os\\nif not os.environ.get('TRAWL_CHILD_FD'): open({{MARKER!r}}, 'w').write(str(os.getpid()))"


class Payload:
    def __reduce__(self):
        return (exec, (CODE,))


class PlantingSpider(scrapy.Spider):
    name = "planting"

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        base = response.url.rsplit("/", 1)[0]
        frontier = self.crawler.engine.scheduler.frontier
        entries = [
            b"\\x01" + pickle.dumps({{"u": f"{{base}}/a.html", "M": {{"x": Payload()}}}}),  # the codec's old tag
            pickle.dumps({{"url": f"{{base}}/b.html", "meta": {{"x": Payload()}}}}, protocol=5),  # its plainer layout
            b"\\x03" + json.dumps({{"u": f"{{base}}/c.html", "C": "os.system"}}).encode(),  # a class by name
        ]
        frontier.commit(requests=[(payload, 5, None) for payload in entries])
        self.logger.warning("planted %s entries; killing the worker process %s", len(entries), os.getppid())
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(0)  # before this process's own scheduler takes them back: they wait for the job's next attempt
"""


@pytest.fixture
def packaged_worker(child_users_swept, package_dirs, mode_worker):
    """The mode's worker; package_dirs allows children on this machine's password-less Redis (test_packaged_redis.py
    shows the production settings refusing them otherwise)."""
    return mode_worker


def wait_until(predicate, *, timeout: float, why: str, worker):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{why} within {timeout} s\n--- worker ---\n{worker.log_tail(120)}"
        time.sleep(0.2)
    return value


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_child_s_pickles_in_its_frontier_never_run_when_the_job_resumes_in_the_worker(
    packaged_worker,
    package_dirs,
    attacker_site,
    api,
    mode,
    settings,
    tmp_path,
):
    marker = tmp_path / "worker-ran-the-pickle"
    ops = client_for("ops", admin=True)
    assert ops.post("/api/scrapers/", {"name": "psecrets"}, format="json").status_code == 201
    in_worker = {"version": "1.0.0", "variant": "stable", "spider": "runtime.spiders.link.LinkSpider"}
    assert ops.post(VERSIONS, in_worker, format="json").status_code == 201
    files = {"planter/__init__.py": "", "planter/spiders.py": PLANTING_SPIDER.format(marker=str(marker))}
    wheel = wheel_build(package_dirs["src"], name="planter", version="2.0.0", files=files)
    created = upload(ops, wheel, "2.0.0", "planter.spiders.PlantingSpider", is_default="true")
    assert created.status_code == 201, created.content
    assert built(ops, "2.0.0", packaged_worker)["package_status"] == "ready"

    submitted = api.post("/api/jobs/", {"url": f"{attacker_site}/index.html", "scraper": "psecrets"}, format="json")
    assert submitted.status_code == 201, submitted.content
    job_id = submitted.json()["id"]
    # The child planted its entries, then killed the pool process running its job.
    first = wait_until(
        lambda: (job := CrawlJob.objects.get(pk=job_id)).worker and job_frontier(job_id).pending() >= 3 and job,
        timeout=180,
        why="the child never planted its entries",
        worker=packaged_worker,
    )
    pool_pid = int(first.worker.rsplit("/", 1)[-1])
    wait_until(lambda: not pid_alive(pool_pid), timeout=60, why="the pool process survived", worker=packaged_worker)
    assert first.version.version == "2.0.0" and first.attempt == 1

    # The admin sends the traffic to the version installed in the worker; the reaper gives the job another attempt.
    assert ops.put("/api/scrapers/psecrets/traffic/", {"1.0.0": 100}, format="json").status_code == 200
    settings.TRAWL_REAPER_STALE_SECONDS = 3
    wait_until(
        lambda: jobs_reap()["requeued"] or CrawlJob.objects.get(pk=job_id).attempt > 1,
        timeout=60,
        why="the reaper never requeued the job",
        worker=packaged_worker,
    )
    final = ("succeeded", "failed", "cancelled", "dead")
    wait_until(
        lambda: marker.exists() or CrawlJob.objects.get(pk=job_id).status in final,
        timeout=180,
        why="the second attempt never ended",
        worker=packaged_worker,
    )
    assert not marker.exists(), f"a frontier entry's __reduce__ ran in worker process {marker.read_text()}"
    job = wait_for_job(job_id, timeout=60)
    packaged_worker.wait_idle()

    log = api.get(f"/api/jobs/{job_id}/log/", {"attempt": 2}).content.decode()
    print(f"[{mode}] attempt {job.attempt} on {job.version.version}: {job.status} {job.error_class}")
    print(f"[{mode}] " + "\n".join(line for line in log.splitlines() if "frontier" in line))
    assert not marker.exists()
    assert (job.attempt, job.version.version) == (2, "1.0.0"), "the second attempt ran in the worker"
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{packaged_worker.log_tail(80)}"
    refused = [line for line in log.splitlines() if "a queued entry was refused, not crawled" in line]
    assert len(refused) == 3, log
    assert "'frontier/refused': 3," in log, "counted in the attempt's stats"
    assert job.stats["frontier_refused"] == 3, "and in the job's"
