"""`manage.py deploy` ships tests/fixtures/deployproject (a pyproject Scrapy project) to a running Trawl: the wheel is
built here, a real worker builds the version's environment, and a job routed to it returns the project's items.
Once into this installation (its services), once over HTTP to a live server with an admin token, as a canary."""

from __future__ import annotations

import io
import shutil

import pytest
from django.core.management import CommandError, call_command

from access.services import token_issue
from items.models import Item
from registry.models import ScraperVersion
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import package_dirs, package_worker  # noqa: F401 - fixtures
from tests.sites import LocalSite, write_catalogue
from tests.workers import BASE_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PROJECT = BASE_DIR / "tests" / "fixtures" / "deployproject"
SPIDER = "deployshop.spiders.shop.CatalogueSpider"


@pytest.fixture
def shop(tmp_path):
    write_catalogue(tmp_path / "site", products=6, per_page=3)
    with LocalSite(tmp_path / "site") as local_site:
        yield local_site


def deploy(*args: str) -> str:
    out = io.StringIO()
    call_command("deploy", str(PROJECT), *args, stdout=out)
    return out.getvalue()


def crawled(api, url: str, worker, **spec) -> list[dict]:
    job_id = api.post("/api/jobs/", {"url": url, **spec}, format="json").json()["id"]
    try:
        job = wait_for_job(job_id, timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- worker log ---\n{worker.log_tail()}") from None
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{worker.log_tail()}"
    return [item.data for item in Item.objects.filter(last_job=job)]


def test_deploy_builds_registers_and_waits_until_a_worker_built_it(package_worker, shop, api):  # noqa: F811 - pytest fixture
    printed = deploy("--scraper", "dshop")

    # The project's only spider and its own version (0.3.0, from pyproject.toml); a new scraper, so its default.
    assert "created scraper 'dshop'" in printed
    assert f"spider: {SPIDER}" in printed
    assert "dshop 0.3.0 is ready" in printed
    version = ScraperVersion.objects.get(scraper__name="dshop", version="0.3.0")
    assert (version.package_status, version.is_default, version.spider) == ("ready", True, SPIDER)
    # Its spider has a name and start_urls: the job names it and starts there.
    assert "manage.py crawl --spider catalogue --scraper dshop --version 0.3.0 --wait" in printed
    assert "live: dshop 0.3.0 is the default now" in printed
    # The build left nothing in the project's tree.
    assert not list(PROJECT.glob("*.egg-info")) and not (PROJECT / "build").exists()

    items = crawled(api, f"{shop.url}/index.html", package_worker, scraper="dshop")
    assert sorted(item["deployed"] for item in items) == [f"deployshop:Product {n}" for n in range(1, 7)]


def test_deploy_over_http_bumps_and_rolls_out_a_canary(package_worker, shop, api, live_server):  # noqa: F811 - pytest fixture
    _, token = token_issue(requester_name="deployer", admin=True)
    # --token=…: a token may start with "-", which argparse would read as an option of its own
    deploy("--scraper", "dshop", "--url", live_server.url, f"--token={token}", "--version", "1.4.2")

    printed = deploy(
        "--scraper", "dshop", "--bump", "minor", "--variant", "canary", "--traffic", "10",
        "--url", live_server.url, f"--token={token}",
    )  # fmt: skip

    assert "dshop 1.5.0 is ready" in printed
    assert "canary, 10% traffic" in printed
    assert f"{live_server.url}/api/jobs/" in printed and '"version": "1.5.0"' in printed
    canary = ScraperVersion.objects.get(scraper__name="dshop", version="1.5.0")
    assert (canary.variant, canary.traffic_pct, canary.package_status) == ("canary", 10, "ready")
    assert not canary.is_default
    items = crawled(api, f"{shop.url}/product-2.html", package_worker, scraper="dshop", version="1.5.0")
    assert sorted(item["deployed"] for item in items) == [f"deployshop:Product {n}" for n in range(1, 7)]


def test_deploy_refuses_a_wrong_token_and_an_unknown_spider(live_server, tmp_path):
    with pytest.raises(CommandError, match="answered 401"):
        deploy("--scraper", "dshop", "--url", live_server.url, "--token", "not-a-token")
    # Registering code is for admins: an ordinary requester's token is refused before anything is created.
    _, requester_token = token_issue(requester_name="someone")
    with pytest.raises(CommandError, match="answered 403"):
        deploy("--scraper", "dshop", "--url", live_server.url, "--token", requester_token)
    assert not ScraperVersion.objects.filter(scraper__name="dshop").exists()
    project = tmp_path / "two"
    shutil.copytree(PROJECT, project)
    spiders = project / "deployshop" / "spiders" / "shop.py"
    spiders.write_text(spiders.read_text() + "\n\nclass OtherSpider(CatalogueSpider):\n    name = 'other'\n")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"no spider named 'nope' \(it has: catalogue, other\)"):
        call_command("deploy", str(project), "--scraper", "dshop", "--spider", "nope", stdout=out)


def test_a_failed_build_prints_its_package_log_and_fails_the_command(package_worker, tmp_path):  # noqa: F811 - pytest fixture
    # A dependency that no wheel directory has: the worker's pip cannot install it.
    project = shutil.copytree(PROJECT, tmp_path / "needs-missing-dep")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('["scrapy>=2.11"]', '["scrapy>=2.11", "trawltestdep==9.0"]'))

    with pytest.raises(CommandError) as refused:
        call_command("deploy", str(project), "--scraper", "dshop", stdout=io.StringIO())

    assert "dshop 0.3.0: the build failed" in str(refused.value)
    assert "trawltestdep==9.0" in str(refused.value), "the package_log is printed"
    assert ScraperVersion.objects.get(scraper__name="dshop", version="0.3.0").package_status == "failed"
