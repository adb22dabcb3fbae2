"""scrapyd's own clients against Trawl's /scrapyd/, with a real worker: scrapyd-deploy (scrapyd-client 2.0.3) packs
a `scrapy startproject` project with two spiders into an egg and deploys it (answered once a worker built it: its
spiders listed at once); schedule.json, sent at once, runs a spider by name with a spider argument and a setting;
listjobs.json shows the job finished with Trawl's log; python-scrapyd-api's calls round-trip; another requester's
token sees none of it. The clients come from requirements-scrapyd.txt (make test)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from access.services import token_issue
from crawls.models import CrawlJob
from items.models import Item
from registry.models import PackageStatus, ScraperVersion
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import package_dirs, package_worker  # noqa: F401 - fixtures
from tests.e2e.test_deploy_startproject import site, startproject  # noqa: F401 - fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCRAPYD_DEPLOY = Path(sys.executable).parent / "scrapyd-deploy"
# The books spider's `code` field reads a spider argument: what schedule.json passes reaches the spider.
CODE = '" + getattr(self, "tag", "none") + "'
# A third spider slow enough to be cancelled while it runs: one request every 2 s, the others queued in its downloader
# slot. Cancelling it used to fetch every queued one, one delay apart, before the child's crawl closed: measured here,
# 8 pages reached the site after cancel.json and the job was `cancelled` 15.9 s after it. The stop now drops them
# (runtime.bridge.stopping): 0 pages, `cancelled` 0.2 s after.
SLOW = """
import scrapy


class SlowSpider(scrapy.Spider):
    name = "slow"
    custom_settings = {{"DOWNLOAD_DELAY": 2, "DOWNLOAD_DELAY_JITTER": 0}}
    start_urls = ["{site}/index.html?n=%d" % n for n in range(300)]

    def parse(self, response):
        yield {{"url": response.url}}
"""
SCRAPYD_CLIENT = Path(sys.executable).parent / "scrapyd-client"


@pytest.fixture
def scrapyd_url(live_server):
    if not SCRAPYD_DEPLOY.exists():
        pytest.skip("scrapyd-client is not installed: make scrapyd-clients (requirements-scrapyd.txt)")
    return f"{live_server.url}/scrapyd/"


def built(project: str, timeout: float = 300) -> ScraperVersion:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        version = ScraperVersion.objects.filter(scraper__name=project).first()
        if version and version.package_status != PackageStatus.BUILDING:
            return version
        time.sleep(1)
    raise AssertionError(f"{project} is still building after {timeout}s")


def test_scrapyd_deploy_schedule_and_listjobs_work_against_trawl(package_worker, site, scrapyd_url, tmp_path):  # noqa: F811
    _, admin_token = token_issue(requester_name="deployer", admin=True)
    _, alice_token = token_issue(requester_name="alice")
    _, bob_token = token_issue(requester_name="bob")
    project = startproject(tmp_path / "myproject", site=site.url, code=CODE)
    (project / "myproject/spiders/slow.py").write_text(SLOW.format(site=site.url))
    (project / "scrapy.cfg").write_text(
        "[settings]\ndefault = myproject.settings\n\n"
        f"[deploy]\nurl = {scrapyd_url}\nproject = myproject\nusername = deployer\npassword = {admin_token}\n"
    )

    deployed = subprocess.run(
        [str(SCRAPYD_DEPLOY), "--version", "1732856400"], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert '"status": "ok"' in deployed.stdout, deployed.stdout + deployed.stderr
    alice, bob = (requests.Session(), requests.Session())
    alice.auth, bob.auth = ("alice", alice_token), ("bob", bob_token)
    # As scrapyd answers once it listed the egg's spiders, addversion.json answered once a worker built the version.
    spiders = alice.get(f"{scrapyd_url}listspiders.json", params={"project": "myproject"}).json()["spiders"]
    assert spiders == ["books", "slow", "toscrape-css"], f"{spiders}\n{deployed.stdout}"
    # Scheduled at once, as scrapyd's users do.
    scheduled = alice.post(
        f"{scrapyd_url}schedule.json",
        data={"project": "myproject", "spider": "books", "tag": "from-scrapyd", "setting": "DEPTH_LIMIT=5"},
    ).json()
    assert scheduled["status"] == "ok", scheduled
    version = built("myproject")
    assert version.package_status == PackageStatus.READY, f"{version.package_log}\n{package_worker.log_tail()}"
    assert version.version == "1.0.0+scrapyd.1732856400" and version.settings_module == "myproject.settings"
    assert set(version.spiders) == {"books", "slow", "toscrape-css"}

    try:
        job = wait_for_job(scheduled["jobid"], timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{package_worker.log_tail()}") from None
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{package_worker.log_tail()}"
    items = [item.data for item in Item.objects.filter(last_job=job)]
    assert len(items) == 6 and {item["code"] for item in items} == {"from-scrapyd"}

    jobs = alice.get(f"{scrapyd_url}listjobs.json", params={"project": "myproject"}).json()
    assert [j["id"] for j in jobs["finished"]] == [scheduled["jobid"]] and not jobs["pending"] and not jobs["running"]
    finished = jobs["finished"][0]
    assert finished["spider"] == "books" and finished["version"] == "1732856400" and finished["outcome"] == "succeeded"
    log = requests.get(finished["log_url"], headers={"Authorization": f"Token {alice_token}"}, timeout=30)
    assert log.status_code == 200 and "Spider opened" in log.text, log.text[:500]

    assert bob.get(f"{scrapyd_url}listjobs.json").json()["finished"] == []
    assert bob.get(f"{scrapyd_url}status.json", params={"job": scheduled["jobid"]}).json()["currstate"] == "unknown"
    assert CrawlJob.objects.get(pk=scheduled["jobid"]).requester.name == "alice"

    scrapyd_api = pytest.importorskip("scrapyd_api")
    # python-scrapyd-api joins absolute paths (/listjobs.json) onto its target: under /scrapyd/ it takes them prefixed.
    endpoints = {name: f"/scrapyd{path}" for name, path in scrapyd_api.constants.DEFAULT_ENDPOINTS.items()}
    client = scrapyd_api.ScrapydAPI(scrapyd_url, auth=("alice", alice_token), endpoints=endpoints)
    assert client.list_projects() == ["myproject"]
    assert client.list_versions("myproject") == ["1732856400"]
    assert client.list_spiders("myproject") == ["books", "slow", "toscrape-css"]
    assert client.job_status("myproject", scheduled["jobid"]) == "finished"
    second = client.schedule("myproject", "toscrape-css")
    assert wait_for_job(second, timeout=180).status == "succeeded", package_worker.log_tail()
    assert {j["id"] for j in client.list_jobs("myproject")["finished"]} == {scheduled["jobid"], second}

    # scrapyd-client's own CLI, with the same scrapy.cfg target (alice's credentials now).
    config = (project / "scrapy.cfg").read_text()
    (project / "scrapy.cfg").write_text(config.replace("username = deployer", "username = alice").replace(
        f"password = {admin_token}", f"password = {alice_token}"))  # fmt: skip
    cli = subprocess.run(
        [str(SCRAPYD_CLIENT), "schedule", "-p", "myproject", "slow", "--arg", "tag=cli"],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "myproject / slow => " in cli.stdout, cli.stdout + cli.stderr
    slow = cli.stdout.rsplit("=> ", 1)[1].strip()
    assert CrawlJob.objects.get(pk=slow).args == {"tag": "cli"}
    deadline = time.monotonic() + 120
    while alice.get(f"{scrapyd_url}status.json", params={"job": slow}).json()["currstate"] != "running":
        assert time.monotonic() < deadline, f"the slow job never ran\n{package_worker.log_tail()}"
        time.sleep(0.5)
    assert bob.post(f"{scrapyd_url}cancel.json", data={"project": "myproject", "job": slow}).json()["prevstate"] is None
    seen_before = len(site.seen)  # the site's request log is what we count against
    cancelled = alice.post(f"{scrapyd_url}cancel.json", data={"project": "myproject", "job": slow}).json()
    assert cancelled["prevstate"] == "running", cancelled
    ended = wait_for_job(slow, timeout=60)
    assert ended.status == "cancelled", package_worker.log_tail()
    took = (ended.finished_at - ended.cancel_requested_at).total_seconds()
    late = [path for path, _ in site.seen[seen_before:]]
    # See SLOW: the slot lets one request go every 2 s, and the worker reads the cancel flag every tick (under a
    # second) and tells the child at once: at most the one request let go before that reaches the site.
    assert len(late) <= 1, (
        f"{late} fetched after the cancel, cancelled {took:.1f} s after it\n{package_worker.log_tail()}"
    )
    shutil.rmtree(project / "build", ignore_errors=True)

    # An egg that does not load: scrapyd-deploy hears it, as from scrapyd, and the last good version keeps running.
    (project / "myproject/spiders/broken.py").write_text("import price_parser_not_installed\n")
    (project / "scrapy.cfg").write_text(config)  # the deployer's admin credentials again
    broken = subprocess.run(
        [str(SCRAPYD_DEPLOY), "--version", "1732856401"], cwd=project, capture_output=True, text=True, timeout=180
    )
    assert '"status": "error"' in broken.stdout and "does not load on Trawl's workers" in broken.stdout, (
        broken.stdout + broken.stderr + package_worker.log_tail()
    )
    assert "price_parser_not_installed" in broken.stdout
    default = ScraperVersion.objects.get(scraper__name="myproject", is_default=True)
    assert default.version == "1.0.0+scrapyd.1732856400", default
    shutil.rmtree(project / "build", ignore_errors=True)
