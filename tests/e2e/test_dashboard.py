"""The admin's operations dashboard in a real browser: Debian's headless Chromium, jobs run by a real worker."""

from __future__ import annotations

import os
import time

import pytest
from django.conf import settings
from django.test import Client

from ops.queues import queue_sample_store
from ops.stats import job_dimensions, job_numbers, stats_record
from tests.browser import CHROMIUM, Chromium

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHARTS = ("chart-jobs", "chart-pages", "chart-queues", "chart-throttle", "chart-versions")
# For each canvas: is a Chart.js chart bound to it, its datasets' sums, and how many pixels it painted.
CHART_STATE = """
Array.from(document.querySelectorAll("canvas")).map((canvas) => {
  const chart = Chart.getChart(canvas);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) { if (pixels[i] !== 0) painted++; }
  return {
    id: canvas.id,
    chart: Boolean(chart) && chart === window.trawlCharts[Object.keys(window.trawlCharts).find(
      (name) => window.trawlCharts[name].canvas === canvas)],
    labels: chart ? chart.data.labels : [],
    sums: chart ? Object.fromEntries(chart.data.datasets.map(
      (set) => [set.label, set.data.reduce((total, value) => total + (value || 0), 0)])) : {},
    painted: painted,
    size: [canvas.width, canvas.height],
  };
})
"""


@pytest.fixture
def chromium_path():
    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: `make browser` (part of `make test`) installs Debian's chromium")
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (`make browser` installs it)")
    return CHROMIUM


def staff_session(django_user_model) -> str:
    staff = django_user_model.objects.create_user("operator", password="not-used", is_staff=True)
    client = Client()
    client.force_login(staff)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def run_jobs(api, site, job_waiter) -> None:
    """One crawl that succeeds and one that fails, run by the worker, so the charts draw real counters."""
    good = api.post("/api/jobs/", {"url": f"{site.url}/product-1.html"}, format="json").json()
    bad = api.post("/api/jobs/", {"url": f"{site.url}/no-such-page.html"}, format="json").json()
    assert job_waiter(good["id"]).status == "succeeded"
    assert job_waiter(bad["id"]).status == "failed"


def test_dashboard_draws_every_chart_in_headless_chromium(
    chromium_path, api, builtins, site, job_waiter, live_server, django_user_model, tmp_path
):
    run_jobs(api, site, job_waiter)
    # Throttle waits as a throttled crawl of the site reports them in its stats (the local site is never throttled).
    # Earlier tests of the run crawled other loopback hosts into the same counters and the pages chart draws the
    # fifteen busiest, so this record is large enough to rank the site first whatever ran before.
    numbers = job_numbers(
        status="succeeded", stats={"pages": 10**6, "throttle/waits": 3, "throttle/wait_seconds_total": 1.5}
    )
    dimensions = job_dimensions(domain="127.0.0.1", scraper="link", version="1.0.0")
    stats_record(at=time.time(), dimensions=dimensions, numbers=numbers)
    queue_sample_store()
    session = staff_session(django_user_model)

    with Chromium(tmp_path / "chromium-profile") as browser:
        browser.set_cookie(url=live_server.url, name=settings.SESSION_COOKIE_NAME, value=session)
        browser.open(f"{live_server.url}/admin/ops/dashboard/")
        browser.wait_for("window.trawlDashboardReady === true")
        charts = {state["id"]: state for state in browser.evaluate(CHART_STATE)}
        title = browser.evaluate("document.title")
        screenshot = browser.screenshot(tmp_path / "dashboard.png")
        console = browser.console

    assert title.startswith("Operations"), title
    assert set(charts) == set(CHARTS), charts
    for canvas_id, state in charts.items():
        assert state["chart"], f"{canvas_id}: no Chart.js chart bound to it"
        assert state["size"][0] > 100 and state["size"][1] > 100, state
        assert state["painted"] > 1000, f"{canvas_id} looks blank: {state}"
    assert charts["chart-jobs"]["sums"]["succeeded"] >= 1
    assert charts["chart-jobs"]["sums"]["failed"] >= 1
    assert "127.0.0.1" in charts["chart-pages"]["labels"]
    assert charts["chart-pages"]["sums"]["last hour"] >= 1
    assert charts["chart-queues"]["labels"], "queue depth needs at least the sample taken above"
    assert "127.0.0.1" in charts["chart-throttle"]["labels"]
    assert charts["chart-throttle"]["sums"]["last 15 min"] >= 1.5
    assert any(label.startswith("link/1.0.0") for label in charts["chart-versions"]["labels"])
    assert charts["chart-versions"]["sums"]["jobs"] >= 2
    assert screenshot.stat().st_size > 20_000, "the screenshot should show a drawn page"
    assert not [line for line in console if "exception" in line or "refresh failed" in line], console
