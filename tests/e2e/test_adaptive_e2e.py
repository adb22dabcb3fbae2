"""Adaptive politeness end to end, at the shipped controller defaults: real workers crawl local sites that degrade
with the rate they are hit, and the sites' own logs say what they went through.

- A site that serves CAPACITY requests a second well, slows down a little above that and answers 503 beyond SLACK
  more: two jobs at once, rule at four times its capacity. Adaptive on: every page fetched (the refused ones went
  back to the frontier and came again later), under 10 % of all requests answered 503, the first ones included.
  Off: pages lost, 503s galore.
- A site that only slows down as it gets busier (never an error): the rate falls before its latency doubles.
- A site whose latency is its own, far above a baseline one instant window set: a few cuts, then the baseline is
  learned again and the crawl goes on.
- The demo shop and a zero-latency site, crawled at once: never slowed.
"""

from __future__ import annotations

import io
import json
import math
from datetime import datetime

import pytest
from django.core.management import call_command

from demo.generate import generate_site
from demo.serve import DemoServer
from project.redis import get_redis
from tests.e2e.test_throttle_e2e import StampedSite, finished, localhost_rule, submit, two_workers  # noqa: F401
from tests.sites import LoadedSite
from throttling.adaptive import AdaptiveConfig, AdaptiveState
from throttling.services import throttle_buckets

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DEFAULTS = AdaptiveConfig()  # the shipped controller: no knob is shrunk here
HUBS = ("a", "b")
CAPACITY, SLACK = 5, 2  # requests per second served well; slow (SLOW s more per request above CAPACITY), then 503
SLOW = 0.15
RATE = 20.0  # the rule: four times what the site takes


def degrading(site: LoadedSite, path: str, now: float) -> tuple[float, int]:
    """Hubs and robots.txt are always served (a lost hub would lose its whole crawl, which is not the point here)."""
    hits = site.recent(now) + 1
    if hits > CAPACITY + SLACK and path != "/robots.txt" and not path.endswith("/0"):
        return 0.0, 503
    return 0.02 + SLOW * max(0, hits - CAPACITY), 200


def crawl_both(api, site: LoadedSite, workers) -> list:
    ids = [submit(api, f"{site.url}/{hub}/0", maxdepth=1) for hub in HUBS]
    jobs = [finished(job_id, workers) for job_id in ids]
    assert [job.status for job in jobs] == ["succeeded", "succeeded"], [job.error_message for job in jobs]
    assert len({job.worker for job in jobs}) == 2, "each job should run on its own worker"
    return jobs


def refused_share(site: LoadedSite, *, after: float) -> tuple[int, int]:
    log = site.log(since=after)
    return sum(1 for _, status, *_ in log if status == 503), len(log)


def log_lines(api, jobs) -> list[str]:
    return [line for job in jobs for line in api.get(f"/api/jobs/{job.pk}/log/").content.decode().splitlines()]


def first_slowdown(api, jobs) -> tuple[float, str]:
    """When the controller first lowered the rate (the end of its first window that needed it), from the jobs' logs."""
    lines = log_lines(api, jobs)
    slowed = sorted(line for line in lines if "of its rate: slowed down" in line)  # ISO times sort as text
    assert slowed, "the controller never slowed down:\n" + "\n".join(lines[-30:])
    return datetime.fromisoformat(slowed[0].split()[0]).timestamp(), slowed[0]


def test_adaptive_on_fetches_every_page_with_few_503s(api, builtins, localhost_rule, two_workers):  # noqa: F811
    localhost_rule(rate=RATE, burst=1, ip_rate=RATE, ip_burst=1)
    with LoadedSite(leaves=70, answer=degrading) as site:
        jobs = crawl_both(api, site, two_workers)

    first = site.log()[0][0]
    refused, requests = refused_share(site, after=first_slowdown(api, jobs)[0])
    requeued = sum(job.stats["throttle"].get("requeued", 0) for job in jobs)
    everything = site.log()
    print(
        f"adaptive on: {site.served(HUBS):.1%} of pages fetched; {refused}/{requests} answered 503 after the first "
        f"window, {sum(1 for _, s, *_ in everything if s == 503)}/{len(everything)} in all; {requeued} re-queued; "
        f"{len(everything) / (everything[-1][0] - first):.2f} req/s"
    )
    print(
        "503s at (s after the first request):", [round(at - first, 2) for at, status, *_ in everything if status == 503]
    )
    refused_in_all = sum(1 for _, status, *_ in everything if status == 503)
    assert site.served(HUBS) >= 0.995, "pages were lost to politeness"
    assert refused <= 0.10 * requests, f"{refused} of {requests} requests answered 503 after the first window"
    assert refused_in_all < 0.10 * len(everything), f"{refused_in_all} of {len(everything)} requests answered 503"
    assert requeued > 0, "the site refused pages at first: they should have gone back to the frontier"


def test_adaptive_off_loses_pages_and_meets_503s(api, builtins, localhost_rule, two_workers):  # noqa: F811
    localhost_rule(rate=RATE, burst=1, ip_rate=RATE, ip_burst=1, adaptive=False)
    with LoadedSite(leaves=70, answer=degrading) as site:
        crawl_both(api, site, two_workers)

    refused, requests = refused_share(site, after=site.log()[0][0] + DEFAULTS.window)
    print(f"adaptive off: {site.served(HUBS):.1%} of pages fetched; {refused}/{requests} answered 503")
    assert site.served(HUBS) < 0.95, "at four times its capacity with Scrapy's retries alone, pages are lost"
    assert refused > 0.3 * requests


# The slowing site: BASE seconds per page at first; after WARM seconds it gets busier (other traffic, say) over RAMP
# seconds, until each request it took in the last second adds BUSY × BASE to the next one's time. At the rule's RATE
# that is 1 + 8 × 0.1875 = 2.5 × BASE: left alone, the crawl would more than double its latency (in 2/3 of RAMP).
BASE, WARM, RAMP, BUSY, SLOW_RATE = 0.5, 3.0, 30.0, 0.1875, 8.0


def slowing(site: LoadedSite, path: str, now: float) -> tuple[float, int]:
    busy = BUSY * min(1.0, max(0.0, now - site.arrivals[0][0] - WARM) / RAMP) if site.arrivals else 0.0
    return BASE * (1 + busy * site.recent(now)), 200


def test_a_site_that_slows_down_sees_the_rate_fall_before_its_latency_doubles(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    localhost_rule(rate=SLOW_RATE, burst=1, ip_rate=SLOW_RATE, ip_burst=1)
    with LoadedSite(leaves=200, answer=slowing) as site:
        job = finished(submit(api, f"{site.url}/a/0", maxdepth=1), two_workers)

    assert job.status == "succeeded", job.error_message
    slowed_at, slowed = first_slowdown(api, [job])
    assert "latency" in slowed, f"the first slowdown should be for latency, not errors: {slowed}"
    before = site.log(until=slowed_at)
    start = before[0][0]
    # Its latency second by second (the mean of the requests that came in each): one request caught in a burst of
    # arrivals is not the site's latency.
    seconds = [
        [delay for at, _, delay, _ in before if start + n <= at < start + n + 1]
        for n in range(int(slowed_at - start) + 1)
    ]
    worst = max(sum(delays) / len(delays) for delays in seconds if delays)
    print(
        f"slowing site: first slowdown {slowed_at - start:.1f}s in, latency then at most {worst / BASE:.2f}× its start"
    )
    assert worst < 2 * BASE, f"the site's latency reached {worst:.2f}s (×{worst / BASE:.2f}) before the rate fell"
    assert all(status == 200 for _, status, *_ in site.log())
    assert site.served(("a",)) == 1.0


def test_a_baseline_the_site_never_comes_near_is_learned_again_and_the_crawl_goes_on(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    """An instant window (robots.txt, cached pages, an hour-old state) left the domain's baseline at 2 ms; its pages
    take 0.25 s however fast they are asked for. The controller cuts a few times, takes that latency as the site's
    own, and the crawl goes on: it is never held at the floor (where 300 pages would take 12 minutes). The cuts alone
    take about 165 pages at this rule's rate: the crawl lasts past them."""
    localhost_rule(rate=RATE, burst=1, ip_rate=RATE, ip_burst=1)
    get_redis().set(throttle_buckets().state_key("localhost"), AdaptiveState(baseline=0.002).as_redis())
    with LoadedSite(leaves=300, answer=lambda site, path, now: (0.25, 200)) as site:
        job = finished(submit(api, f"{site.url}/a/0", maxdepth=1), two_workers)

    assert job.status == "succeeded", job.error_message
    lines = log_lines(api, [job])
    print("\n".join(line for line in lines if "of its rate" in line))
    assert any("taken as the site's own" in line for line in lines), "\n".join(lines[-30:])
    floor = DEFAULTS.latency_decrease**DEFAULTS.latency_cuts
    assert job.stats["throttle"]["adaptive_min_factor"] >= round(floor, 3) - 0.001, job.stats["throttle"]
    assert site.served(("a",)) == 1.0


def test_the_demo_shop_and_a_zero_latency_site_are_never_slowed(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
    tmp_path,
):
    localhost_rule(rate=40, burst=5, ip_rate=40, ip_burst=5)
    with DemoServer(tmp_path / "shop") as shop, StampedSite() as instant:
        generate_site(shop.root, shop.url, categories=4, products_per_category=30, per_page=10)
        out = io.StringIO()
        call_command("seed_demo", base_url=shop.url, credentials=tmp_path / "credentials.json", stdout=out)
        assert json.loads(out.getvalue())["api_token"]
        shop_job = api.post("/api/jobs/", {"url": f"{shop.url}/index.html", "scraper": "demo_shop"}, format="json")
        assert shop_job.status_code == 201, shop_job.content
        ids = [shop_job.json()["id"], submit(api, f"{instant.url}/a/0", maxdepth=7)]
        jobs = [finished(job_id, two_workers) for job_id in ids]

    for job in jobs:
        assert job.status == "succeeded", job.error_message
        throttle = job.stats["throttle"]
        print(f"{job.url}: {job.stats.get('pages')} pages, {throttle.get('adaptive_decisions', 0)} decisions")
        assert throttle.get("adaptive_decisions", 0) > 0, "the crawl should last long enough for the controller"
        assert math.isclose(throttle.get("adaptive_min_factor", 1.0), 1.0), f"{job.url} was slowed: {throttle}"
