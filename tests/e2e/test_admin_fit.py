"""Admin pages at 1280 px in headless Chromium: the dashboard's tables stay inside their cards, the item list shows
"first seen", and a source's run chart is drawn at its intended size (it was a 300×208 canvas)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from access.tenancy import system_tenant
from crawls.models import CrawlJob
from items.models import Item
from ops.stats import job_dimensions, job_numbers, stats_record
from registry.models import Scraper
from sources.models import Source
from tests.browser import Chromium
from tests.e2e.test_admin_pages import chromium_path  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
LONG_URL = "https://www.a-shop-with-a-rather-long-domain-name.example/category/garden-furniture/page-12.html?sort=p"
# Every card: how far its content reaches beyond its box (0 when it fits), and the page's sideways scroll.
CARDS = """
(() => ({
  page_scroll: document.documentElement.scrollWidth - window.innerWidth,
  cards: Array.from(document.querySelectorAll(".ops-card")).map((card) => ({
    title: card.querySelector("h2").textContent,
    spill: card.scrollWidth - card.clientWidth,
    right: card.getBoundingClientRect().right,
    tables: Array.from(card.querySelectorAll("table")).map((t) => t.getBoundingClientRect().right
      - card.getBoundingClientRect().right),
  })),
}))()
"""
COLUMN = """
(() => {
  const box = document.querySelector("#changelist .results");
  const cell = Array.from(document.querySelectorAll("#result_list th")).find(
    (th) => th.textContent.trim().toLowerCase() === "%s");
  return {
    visible: Math.min(box.getBoundingClientRect().right, window.innerWidth),
    right: cell ? cell.getBoundingClientRect().right : null,
    page_scroll: document.documentElement.scrollWidth - window.innerWidth,
  };
})()
"""
DRAWN = "typeof Chart !== 'undefined' && !!Chart.getChart(document.querySelector('.ops-source-runs canvas'))"
CANVAS = """
(() => {
  const canvas = document.querySelector(".ops-source-runs canvas");
  const box = canvas.getBoundingClientRect();
  const chart = !!Chart.getChart(canvas);
  return {width: box.width, height: box.height, right: box.right, window: window.innerWidth, chart: chart};
})()
"""


@pytest.fixture
def browser(chromium_path, live_server, django_user_model, tmp_path):  # noqa: F811
    operator = django_user_model.objects.create_superuser("operator", password="not-used")
    client = Client()
    client.force_login(operator)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    with Chromium(tmp_path / "chromium-profile", width=WIDTH, height=900) as chromium:
        chromium.set_cookie(url=live_server.url, name=settings.SESSION_COOKIE_NAME, value=session)
        yield chromium


def test_dashboard_tables_stay_inside_their_cards_at_1280px(browser, builtins, live_server):
    # Big numbers, as a busy installation has them: the widest the totals table gets.
    numbers = job_numbers(
        status="succeeded", stats={"pages": 12_345_678, "items_new": 9_876_543, "throttle/wait_seconds": 123_456.7}
    )
    stats_record(at=time.time(), dimensions=job_dimensions(domain="shop.example", scraper="link", version="1.0.0"),
                 numbers=numbers)  # fmt: skip

    browser.open(f"{live_server.url}/admin/ops/dashboard/")
    browser.wait_for("window.trawlDashboardReady === true")
    layout = browser.evaluate(CARDS)

    assert layout["page_scroll"] <= 0, f"the dashboard scrolls sideways at {WIDTH} px: {layout}"
    assert "Totals" in [card["title"] for card in layout["cards"]]
    for card in layout["cards"]:
        assert card["spill"] <= 0, f"{card['title']!r} spills out of its card at {WIDTH} px: {card}"
        assert all(right <= 0 for right in card["tables"]), f"{card['title']!r}: a table ends outside: {card}"
        assert card["right"] <= WIDTH


def test_item_list_shows_first_seen_at_1280px(browser, builtins, live_server):
    shop = Scraper.objects.get(name="link")
    for n in range(3):
        Item.objects.create(
            tenant=system_tenant(), scraper=shop, fingerprint=f"f{n}", url=f"{LONG_URL}&n={n}", content_hash="h",
            data={"title": "A garden chair with a very long product title, as shops write them, in oak " * 2},
        )  # fmt: skip

    browser.open(f"{live_server.url}/admin/items/item/")
    layout = browser.evaluate(COLUMN % "first seen")

    assert layout["page_scroll"] <= 0, f"the item list scrolls sideways at {WIDTH} px: {layout}"
    assert layout["right"] is not None and layout["right"] <= layout["visible"], f"first seen is cut off: {layout}"


def test_a_sources_run_chart_is_drawn_at_its_size_at_1280px(browser, builtins, live_server):
    source = Source.objects.create(url="http://shop.example/list", scraper=Scraper.objects.get(name="link"))
    now = timezone.now()
    for n in range(5):
        CrawlJob.objects.create(
            url=source.url, scraper=source.scraper, source=source, status="succeeded",
            queued_at=now - timedelta(hours=n), started_at=now - timedelta(hours=n), finished_at=now,
            stats={"pages": 10 + n, "items_new": n, "items_unchanged": 5},
        )  # fmt: skip

    browser.open(f"{live_server.url}/admin/sources/source/{source.pk}/change/")
    browser.wait_for(
        "typeof Chart !== 'undefined' && !!Chart.getChart(document.querySelector('.ops-source-runs canvas'))"
    )
    canvas = browser.evaluate(CANVAS)

    assert canvas["chart"]
    # 48em wide and 16em high at the admin's font size, not Chart.js's 300 px fallback; inside the window.
    assert canvas["width"] >= 600 and canvas["height"] >= 200, f"the run chart is {canvas}"
    assert canvas["right"] <= canvas["window"]
