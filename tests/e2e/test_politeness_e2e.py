"""Real workers crawl a local site whose robots.txt asks for a Crawl-delay, and one whose rule caps pages per job; the
site itself records when each request arrived."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.utils import timezone

from tests.e2e.test_throttle_e2e import (  # noqa: F401 - fixtures
    StampedSite,
    admin_api,
    finished,
    localhost_rule,
    submit,
    two_workers,
)
from throttling.models import DomainThrottle
from throttling.services import throttle_rules_load

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class DelayedSite(StampedSite):
    """The stamped site, with a robots.txt asking every crawler for one request every 2 s."""

    @staticmethod
    def page(path: str) -> str:
        if path == "/robots.txt":
            return "User-agent: *\nCrawl-delay: 2\nDisallow:\n"
        return StampedSite.page(path)


def test_crawl_delay_holds_two_jobs_on_two_workers_to_one_request_per_delay(
    api,
    admin_api,  # noqa: F811
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    localhost_rule(rate=20, burst=10, ip_rate=20, ip_burst=10)
    with DelayedSite() as site:
        ids = [submit(api, f"{site.url}/{tree}/0", maxdepth=3) for tree in ("a", "b")]
        jobs = [finished(job_id, two_workers) for job_id in ids]
        arrivals = sorted(site.times())

    assert [job.status for job in jobs] == ["succeeded", "succeeded"], [job.error_message for job in jobs]
    assert len({job.worker for job in jobs}) == 2, "each job should run on its own worker"
    assert max(job.started_at for job in jobs) < min(job.finished_at for job in jobs), "the crawls should overlap"
    assert len(arrivals) >= 2 * 15 + 1, "15 pages per crawl, and robots.txt (once, or once each if both ask at once)"
    mean_gap = (arrivals[-1] - arrivals[0]) / (len(arrivals) - 1)
    print(f"crawl-delay 2 s, rule 20/s, two jobs: {len(arrivals)} requests, mean gap {mean_gap:.2f} s")
    assert mean_gap >= 1.8, "robots.txt asked for one request every 2 s, from everyone together"
    assert [job.stats["throttle"].get("robots_delay") for job in jobs] == [2.0, 2.0], "each job's stats say why"
    detail = admin_api.get("/api/throttles/localhost/").json()
    assert detail["robots_delay"] == 2.0 and detail["rate"] == 20


def test_a_rules_max_pages_per_job_stops_a_crawl_fetching_more_of_its_domain(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    localhost_rule(rate=50, burst=50, ip_rate=50, ip_burst=50, max_pages_per_job=5)
    with StampedSite() as site:
        job = finished(submit(api, f"{site.url}/a/0", maxdepth=3), two_workers)
        pages = [path for _, path in site.arrivals if path != "/robots.txt"]

    assert job.status == "succeeded", job.error_message
    assert len(pages) == 5, f"the rule allows 5 pages of the domain per job; the site served {pages}"
    assert job.stats["throttle"]["page_limit_reached"] >= 1, "the job's stats say pages were left for the limit"


def test_a_rule_changed_behind_the_services_back_reaches_running_crawls_with_no_take_kept_waiting(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    """The mirror no longer expires every TRAWL_THROTTLE_RULES_TTL: one crawl process finds the changed version and
    reloads while takes are answered; without the check the crawl would never see the change."""
    localhost_rule(rate=5, burst=1, ip_rate=5, ip_burst=1)
    throttle_rules_load()  # the mirror is there before the crawl: any "stale" answer would be the reload's
    with StampedSite() as site:
        job_id = submit(api, f"{site.url}/a/0", maxdepth=9)  # 400 pages: 80 s at 5/s if nothing stopped it
        deadline = time.monotonic() + 60
        while len(site.times()) < 10:
            assert time.monotonic() < deadline, "the crawl never started"
            time.sleep(0.05)
        changed_at = time.time()
        # As a shell's save() would: no service, no publication to Redis.
        DomainThrottle.objects.filter(domain="localhost").update(blocked=True, updated_at=timezone.now())
        job = finished(job_id, two_workers)
        last = max(site.times())

    period = settings.TRAWL_THROTTLE_RULES_TTL
    print(f"rule blocked behind the services' back: the site's last request {last - changed_at:.1f} s later")
    assert last - changed_at <= 1.5 * period + period + 2, "the running crawl should have found the change"
    throttle = job.stats["throttle"]
    assert throttle.get("blocked", 0) >= 1 and "rules_awaited" not in throttle, throttle


class GuardedSite(StampedSite):
    """A robots.txt that disallows one subtree: every job must obey it, whether it read robots.txt itself or not."""

    @staticmethod
    def page(path: str) -> str:
        if path == "/robots.txt":
            return "User-agent: *\nDisallow: /a/2\n"
        return StampedSite.page(path)


def test_robots_txt_is_read_once_for_every_job_and_worker_and_obeyed_by_each(
    api,
    builtins,
    localhost_rule,  # noqa: F811
    two_workers,  # noqa: F811
):
    """Scrapy fetches a host's robots.txt once per crawl; Trawl's middleware (throttling/robots_shared.py) keeps the
    first crawl's copy in Redis for TRAWL_THROTTLE_ROBOTS_TTL, so three jobs one after another, on two workers, fetch
    it once and all obey it."""
    localhost_rule(rate=100, burst=100, ip_rate=100, ip_burst=100)
    with GuardedSite() as site:
        jobs = [finished(submit(api, f"{site.url}/a/0", maxdepth=3), two_workers) for _ in range(3)]
        paths = [path for _, path in site.arrivals]

    assert [job.status for job in jobs] == ["succeeded"] * 3, [job.error_message for job in jobs]
    assert paths.count("/robots.txt") == 1, paths
    assert "/a/2" not in paths and "/a/5" not in paths, "every job obeyed the Disallow, the shared copy too"
    assert paths.count("/a/1") == 3, "each job crawled the rest"
    assert [job.stats["robots_forbidden"] for job in jobs] == [1, 1, 1]
