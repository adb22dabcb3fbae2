"""The watchdog extensions' rules, and the components built from a crawler's settings."""

from __future__ import annotations

import pytest
from scrapy.exceptions import NotConfigured

from runtime.watch.watchdogs import ErrorRateWatchdog, FieldCoverage, StallWatchdog, is_erroring, is_stalled
from sources.scheduling import job_outcome, plan_next_run
from tests.crawler import trawl_crawler


def test_stalled_only_after_the_limit():
    assert not is_stalled(idle=599.9, limit=600)
    assert is_stalled(idle=600, limit=600)
    assert not is_stalled(idle=10_000, limit=0)


def test_erroring_needs_enough_requests():
    failing = {"requests": 19, "status_codes": {"500": 19}}

    assert not is_erroring(stats=failing, max_rate=0.5, min_requests=20)
    assert is_erroring(stats={**failing, "requests": 20, "status_codes": {"500": 20}}, max_rate=0.5, min_requests=20)
    assert not is_erroring(
        stats={"requests": 40, "status_codes": {"500": 20, "200": 20}}, max_rate=0.5, min_requests=20
    )


def test_watchdogs_read_their_settings():
    assert StallWatchdog.from_crawler(trawl_crawler()).seconds == 600
    assert StallWatchdog.from_crawler(trawl_crawler(settings_dict={"TRAWL_STALL_SECONDS": 5})).seconds == 5
    with pytest.raises(NotConfigured):
        StallWatchdog.from_crawler(trawl_crawler(settings_dict={"TRAWL_STALL_SECONDS": 0}))
    with pytest.raises(NotConfigured):
        ErrorRateWatchdog.from_crawler(trawl_crawler(settings_dict={"TRAWL_MONITORS": {"min_items": 3}}))
    watchdog = ErrorRateWatchdog.from_crawler(
        trawl_crawler(settings_dict={"TRAWL_MONITORS": {"max_error_rate": {"value": 0.3, "fail": True}}})
    )
    assert (watchdog.max_rate, watchdog.min_requests) == (0.3, 20)


def test_field_coverage_counts_non_empty_values():
    crawler = trawl_crawler()
    crawler.stats.open_spider()
    coverage = FieldCoverage(crawler.stats)

    for item in ({"title": "a", "price": ""}, {"title": "b", "price": "3.00", "tags": []}):
        coverage.item_passed(item)

    stats = crawler.stats.get_stats()
    assert (stats["coverage/items"], stats["coverage/field/title"], stats["coverage/field/price"]) == (2, 2, 1)
    assert "coverage/field/tags" not in stats


def test_a_stalled_source_backs_off_like_an_unreachable_site():
    plan = plan_next_run(
        outcome=job_outcome(status="failed", error_class="stalled", stats={}),
        interval=3600,
        minimum=600,
        maximum=86400,
        failures=0,
        many=0.25,
        steps=(3600, 14400, 86400),
        max_retry_after=86400,
    )

    assert (plan.failures, plan.delay) == (1, 3600)
