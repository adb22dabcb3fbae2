"""The job, batch and item admin pages as an operator sees them: read-only, numbers laid out, Cancel, links — and the
job list's key columns visible at 1280 px, checked in headless Chromium with a screenshot."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from access.tenancy import system_tenant
from crawls.models import Batch, CrawlJob
from items.models import Item, ItemSighting
from registry.models import Scraper, ScraperVersion
from tests.browser import CHROMIUM, Chromium

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
KEY_COLUMNS = ("column-status_badge", "column-error_class", "column-pages", "column-items", "column-duration_s")
KEY_COLUMNS += ("column-version_label", "column-queued")
# For each key column of the job list: where its header ends, against the window's width; and any horizontal scroll.
# The list's table scrolls inside its own box (`.results`), so "visible" means inside that box's visible part.
LAYOUT = """
(() => {
  const box = document.querySelector("#changelist .results");
  const visible = Math.min(box.getBoundingClientRect().right, window.innerWidth);
  return {
    visible: visible,
    page_scroll: document.documentElement.scrollWidth - window.innerWidth,
    columns: Object.fromEntries(%s.map((name) => {
      const cell = document.querySelector("th." + name);
      return [name, cell ? cell.getBoundingClientRect().right : null];
    })),
  };
})()
"""


@pytest.fixture
def chromium_path():
    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: `make browser` (part of `make test`) installs Debian's chromium")
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (`make browser` installs it)")
    return CHROMIUM


@pytest.fixture
def operator(django_user_model) -> Client:
    staff = django_user_model.objects.create_superuser("operator", password="not-used")
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def jobs(builtins) -> dict[str, CrawlJob]:
    shop = Scraper.objects.create(name="demo_shop_with_a_long_name")
    version = ScraperVersion.objects.create(scraper=shop, version="1.10.0-rc.1", variant="canary", spider="x.Y")
    now = timezone.now()
    long_url = "https://www.a-shop-with-a-rather-long-domain-name.example/category/garden-furniture/page-12.html?sort=p"
    batch = Batch.objects.create(name="nightly", total=2)
    finished = CrawlJob.objects.create(
        url=long_url, scraper=shop, version=version, status="failed", error_class="spider_error", batch=batch,
        started_at=now - timedelta(seconds=9), finished_at=now, error_message="spider raised 1 time(s)",
        stats={"pages": 133, "requests": 140, "items": 120, "items_new": 100, "items_changed": 20,
               "status_codes": {"200": 130, "404": 3}, "throttle": {"waits": 1527, "wait_seconds_total": 65.5,
               "held_seconds": 4.2}},
    )  # fmt: skip
    running = CrawlJob.objects.create(
        url=long_url, scraper=shop, version=version, status="running", started_at=now, batch=batch
    )
    item = Item.objects.create(
        tenant=system_tenant(), scraper=shop, fingerprint="f1", url=long_url, data={"title": "Chair"}, content_hash="h"
    )
    ItemSighting.objects.create(job=finished, item=item, change="new")
    return {"finished": finished, "running": running, "batch": batch, "item": item}


def test_job_batch_and_item_pages_are_read_only_with_cancel_and_links(operator, jobs):
    finished, running, batch = jobs["finished"], jobs["running"], jobs["batch"]

    page = operator.get(f"/admin/crawls/crawljob/{running.pk}/change/").content.decode()
    done_page = operator.get(f"/admin/crawls/crawljob/{finished.pk}/change/").content.decode()
    batch_page = operator.get(f"/admin/crawls/batch/{batch.pk}/change/").content.decode()
    item_list = operator.get("/admin/items/item/").content.decode()
    item_page = operator.get(f"/admin/items/item/{jobs['item'].pk}/change/").content.decode()

    for html in (page, done_page, batch_page, item_page):
        assert 'name="_save"' not in html and 'name="_continue"' not in html
        assert "deletelink" not in html
    assert "Add item" not in item_list and "/admin/items/item/add/" not in item_list
    assert f"/admin/crawls/crawljob/{running.pk}/cancel/" in page and "Cancel job" in page
    assert "Cancel job" not in done_page, "an ended job has nothing to cancel"
    assert f"/admin/items/item/?sightings__job__id__exact={finished.pk}" in done_page and "Items (1)" in done_page
    assert "throttle delay" in done_page and "4.2 s (1527 waits)" in done_page and "200 ×130" in done_page
    assert f"/admin/crawls/batch/{batch.pk}/cancel/" in batch_page
    assert f"/admin/crawls/crawljob/?batch__id__exact={batch.pk}" in batch_page
    assert "Chair" in operator.get(f"/admin/items/item/?sightings__job__id__exact={finished.pk}").content.decode()

    response = operator.post(f"/admin/crawls/crawljob/{running.pk}/cancel/")

    assert response.status_code == 302
    running.refresh_from_db()
    assert running.cancel_requested_at is not None, "the button asks the running crawl to stop"
    assert operator.get(f"/admin/crawls/crawljob/{running.pk}/cancel/").status_code == 405


def test_job_list_key_columns_visible_at_1280px_in_headless_chromium(
    chromium_path, operator, jobs, live_server, tmp_path
):
    session = operator.cookies[settings.SESSION_COOKIE_NAME].value

    with Chromium(tmp_path / "chromium-profile", width=WIDTH, height=900) as browser:
        browser.set_cookie(url=live_server.url, name=settings.SESSION_COOKIE_NAME, value=session)
        browser.open(f"{live_server.url}/admin/crawls/crawljob/")
        layout = browser.evaluate(LAYOUT % list(KEY_COLUMNS))
        shot = browser.screenshot(tmp_path / "jobs-1280.png")
        browser.open(f"{live_server.url}/admin/crawls/crawljob/{jobs['running'].pk}/change/")
        buttons = browser.evaluate(
            "({cancel: !!document.querySelector('button.trawl-cancel'),"
            " save: !!document.querySelector('input[name=_save]'), scroll: document.documentElement.scrollWidth})"
        )
        page_shot = browser.screenshot(tmp_path / "job-1280.png")

    assert layout["page_scroll"] <= 0, f"the page scrolls sideways at {WIDTH} px: {layout}"
    for name, right in layout["columns"].items():
        assert right is not None and right <= layout["visible"], f"{name} is hidden at {WIDTH} px: {layout}"
    assert buttons == {"cancel": True, "save": False, "scroll": buttons["scroll"]}
    assert buttons["scroll"] <= WIDTH
    assert shot.stat().st_size > 10_000 and page_shot.stat().st_size > 10_000, "screenshots of drawn pages"
