"""Record and replay through the REST API, a real worker and the replay's child process, against a 50-page local site:
the same version replays clean without touching the site; one with a changed selector names that field on exactly
the items it changed; a version that reaches for the network fails its replay."""

from __future__ import annotations

import time

import pytest
from django.core.management import CommandError, call_command

from crawls.models import JobRecording
from registry.models import Scraper, ScraperVersion
from tests.sites import LocalSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PRODUCTS, PER_PAGE = 40, 4  # 10 list pages + 40 products: 50 pages
ON_SALE = {10, 20, 30, 40}  # two prices on the page: the sale one first


@pytest.fixture(scope="module")
def shop_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay-shop")
    (root / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    for page in range(1, PRODUCTS // PER_PAGE + 1):
        numbers = range((page - 1) * PER_PAGE + 1, page * PER_PAGE + 1)
        links = "".join(f'<a class="product" href="/product-{n}.html">{n}</a>' for n in numbers)
        following = f'<a class="next" href="/list-{page + 1}.html">next</a>' if page < PRODUCTS // PER_PAGE else ""
        (root / f"list-{page}.html").write_text(f"<html><body>{links}{following}</body></html>")
    for n in range(1, PRODUCTS + 1):
        sale = f'<span class="price">{n}.00</span>' if n in ON_SALE else ""
        (root / f"product-{n}.html").write_text(
            f'<html><body><h1>Product {n}</h1>{sale}<span class="price">{n + 10}.00</span></body></html>'
        )
    with LocalSite(root) as site:
        yield site


@pytest.fixture
def shop(builtins):
    scraper = Scraper.objects.create(name="replayshop")
    for version, spider in (("1.0.0", "ShopV1"), ("1.0.1", "ShopV1"), ("1.1.0", "ShopV2"), ("1.2.0", "Fetching")):
        ScraperVersion.objects.create(
            scraper=scraper,
            version=version,
            spider=f"tests.fixtures.replay_spiders.{spider}",
            is_default=version == "1.0.0",
            variant="stable" if version == "1.0.0" else "beta",
        )
    scraper.settings = {"TRAWL_REPLAY_REQUIRED": True}
    scraper.save()
    return scraper


def replayed(api, job_id: str, version: str) -> dict:
    asked = api.post(f"/api/jobs/{job_id}/replay/", {"version": version}, format="json")
    assert asked.status_code == 202, asked.content
    deadline = time.monotonic() + 120
    while True:
        (found,) = [r for r in api.get(f"/api/jobs/{job_id}/replays/").json() if r["id"] == asked.json()["id"]]
        if found["status"] not in ("queued", "running"):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.3)


def test_record_then_replay_clean_changed_and_networked_versions(api, admin_client, shop, shop_site, job_waiter):
    submitted = api.post(
        "/api/jobs/",
        {
            "url": f"{shop_site.url}/list-1.html",
            "scraper": "replayshop",
            "version": "1.0.0",
            "options": {"record": True},
        },
        format="json",
    )
    assert submitted.status_code == 201, submitted.content
    job = job_waiter(submitted.json()["id"])
    assert job.status == "succeeded", job.error_message
    assert job.stats["pages"] == 50
    (recording,) = JobRecording.objects.filter(job=job)
    assert recording.responses >= 50 and len(recording.items) == PRODUCTS and not recording.truncated
    hits = sum(shop_site.hits.values())

    same = replayed(api, str(job.pk), "1.0.0")
    changed = replayed(api, str(job.pk), "1.1.0")
    networked = replayed(api, str(job.pk), "1.2.0")

    assert sum(shop_site.hits.values()) == hits, "a replay reached the site"
    assert same["status"] == "clean", (same["error"], same["report"])
    assert (same["report"]["pages"], same["report"]["network"], same["report"]["recorded"]) == (50, [], PRODUCTS)
    assert changed["status"] == "different", changed
    assert list(changed["report"]["fields"]) == ["price"]
    assert changed["report"]["fields"]["price"]["items"] == len(ON_SALE)
    differing = {example["item"] for example in changed["report"]["fields"]["price"]["examples"]}
    assert differing == {f"url:{shop_site.url}/product-{n}.html" for n in ON_SALE}
    assert changed["report"]["summary"] == f"price differs on {len(ON_SALE)} of {PRODUCTS} item(s)"
    assert networked["status"] == "failed" and "opened a socket" in networked["error"], networked

    page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
    assert f"replay {changed['id']} by 1.1.0: <b>different</b> price differs on 4" in page

    with pytest.raises(CommandError) as raised:
        call_command("replay", str(job.pk), "--version", "1.1.0")
    assert raised.value.returncode == 3 and "price differs on 4" in str(raised.value)
    call_command("replay", str(job.pk), "--version", "1.0.0")  # clean: no error


def test_a_promotion_that_requires_a_clean_replay_is_refused_with_the_diffs_summary(
    api, admin_api, shop, shop_site, job_waiter
):
    submitted = api.post(
        "/api/jobs/",
        {"url": f"{shop_site.url}/list-1.html", "scraper": "replayshop", "options": {"record": True}},
        format="json",
    )
    job = job_waiter(submitted.json()["id"])
    promote = "/api/scrapers/replayshop/versions/{}/promote/"

    unreplayed = admin_api.post(promote.format("1.1.0"))
    replayed(api, str(job.pk), "1.1.0")
    different = admin_api.post(promote.format("1.1.0"))
    replayed(api, str(job.pk), "1.0.1")
    clean = admin_api.post(promote.format("1.0.1"))

    assert unreplayed.status_code == 400 and "no replay of its latest recorded job" in str(unreplayed.json())
    assert different.status_code == 400, different.content
    assert f"price differs on {len(ON_SALE)} of {PRODUCTS} item(s)" in str(different.json()), different.json()
    assert clean.status_code == 200, clean.content
    assert ScraperVersion.objects.get(scraper=shop, is_default=True).version == "1.0.1"
