"""The rolling-window counters, against real Redis and a fixed clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from ops import stats
from ops.stats import (
    domain_totals,
    job_dimensions,
    job_numbers,
    stats_per_minute,
    stats_record,
    stats_windows,
    summarize,
    throttle_numbers,
    window_buckets,
)
from project.redis import get_redis

NOW = datetime(2026, 3, 14, 12, 34, 56, tzinfo=UTC).timestamp()


@pytest.fixture
def fixed_clock(monkeypatch):
    monkeypatch.setattr(stats, "clock", lambda: NOW)
    return NOW


def finish(*, ago: float, domain: str = "shop.test", scraper: str = "link", version: str = "1.0.0", **job) -> None:
    """Count one ended job the way a finished job is counted, `ago` seconds before NOW."""
    numbers = job_numbers(
        status=job.get("status", "succeeded"),
        error_class=job.get("error_class", ""),
        stats=job.get("stats", {"pages": 3, "items_new": 2, "status_codes": {"200": 3}}),
        duration=job.get("duration", 4.0),
    )
    dimensions = job_dimensions(domain=domain, scraper=scraper, version=version)
    stats_record(at=NOW - ago, dimensions=dimensions, numbers=numbers, duration=job.get("duration", 4.0))


def minutes_of(keys: list[str]) -> list[int]:
    """Expand bucket keys back into the minutes they cover."""
    covered = []
    for key in keys:
        kind, number = key.split(":")[-2:]
        covered += [int(number)] if kind == "m" else list(range(int(number) * 60, int(number) * 60 + 60))
    return sorted(covered)


@pytest.mark.parametrize("seconds", [60, 900, 3600, 86400])
@pytest.mark.parametrize("offset", [0, 59, 3540, 3599, 1234567])
def test_window_covers_exactly_its_last_minutes_once_each(settings, seconds, offset):
    now = 1_700_000_000 - 1_700_000_000 % 3600 + offset
    last = int(now) // 60

    covered = minutes_of(window_buckets(now=now, seconds=seconds))

    assert covered == list(range(last - seconds // 60 + 1, last + 1))


def test_day_window_reads_hour_buckets_for_whole_hours(settings):
    keys = window_buckets(now=NOW, seconds=86400)

    assert sum(":h:" in key for key in keys) == 23
    assert len(keys) < 100, "the day window must not read 1440 minute buckets"


def test_windows_count_jobs_by_when_they_ended(stats_prefix, fixed_clock):
    finish(ago=10)  # this minute
    finish(ago=14 * 60, status="failed", error_class="http_5xx")  # 14 min ago: inside 900 s
    finish(ago=20 * 60)  # 20 min: 3600 s only
    finish(ago=5 * 3600, domain="other.test")  # 5 h: 86400 s only
    finish(ago=2 * 86400, status="failed", error_class="timeout")  # 2 days: lifetime only

    windows = stats_windows()
    totals = {window: summarize(windows[window]["all"][""])["jobs"] for window in windows}

    assert totals["900"] == {"succeeded": 1, "failed": 1, "cancelled": 0, "dead": 0, "total": 2}
    assert totals["3600"]["total"] == 3
    assert totals["86400"] == {"succeeded": 3, "failed": 1, "cancelled": 0, "dead": 0, "total": 4}
    assert totals["lifetime"] == {"succeeded": 3, "failed": 2, "cancelled": 0, "dead": 0, "total": 5}
    assert summarize(windows["900"]["all"][""])["error_classes"] == {"http_5xx": 1}
    assert summarize(windows["lifetime"]["all"][""])["error_classes"] == {"http_5xx": 1, "timeout": 1}


def test_window_edge_is_the_start_of_its_first_minute(stats_prefix, fixed_clock):
    first_minute = (int(NOW) // 60 - 14) * 60  # 900 s = the current minute and the 14 before it
    finish(ago=NOW - first_minute)  # the first second of the window: in
    finish(ago=NOW - first_minute + 1)  # the last second before it: out

    windows = stats_windows()

    assert summarize(windows["900"]["all"][""])["jobs"]["total"] == 1
    assert summarize(windows["3600"]["all"][""])["jobs"]["total"] == 2


def test_counts_split_per_domain_scraper_and_version(stats_prefix, fixed_clock):
    finish(ago=30, domain="a.test", version="1.0.0", stats={"pages": 5, "items_new": 4, "status_codes": {"200": 5}})
    finish(ago=40, domain="a.test", version="1.1.0", stats={"pages": 2, "items_changed": 1, "status_codes": {"404": 2}})
    finish(ago=50, domain="b.test", scraper="shop", version="2.0.0", stats={"pages": 7, "bytes": 700})

    window = stats_windows()["900"]
    domain_a = summarize(window["domain"]["a.test"])

    assert (domain_a["pages"], domain_a["items_new"], domain_a["items_changed"]) == (7, 4, 1)
    assert domain_a["status_codes"] == {"200": 5, "404": 2}
    assert summarize(window["domain"]["b.test"])["bytes"] == 700
    assert summarize(window["scraper"]["link"])["jobs"]["total"] == 2
    assert summarize(window["version"]["link/1.1.0"])["pages"] == 2
    assert summarize(window["version"]["shop/2.0.0"])["pages"] == 7
    assert summarize(window["all"][""])["pages"] == 14


def test_throttle_waits_come_from_the_jobs_scrapy_stats(stats_prefix, fixed_clock):
    finish(ago=5, stats={"pages": 1, "throttle/waits": 4, "throttle/wait_seconds_total": 2.5, "throttle/delayed": 2})
    finish(ago=6, stats={"pages": 1, "throttle": {"waits": 1, "wait_seconds": 0.25}})  # stored before the rename
    finish(ago=7, stats={"pages": 1, "throttle": {"wait_seconds_total": 1.0, "held_seconds": 0.5}})

    numbers = summarize(stats_windows()["900"]["domain"]["shop.test"])

    assert (numbers["throttle_waits"], numbers["throttle_wait_seconds"], numbers["throttle_delayed"]) == (5, 3.75, 2)


def test_jobs_per_minute_series_puts_each_job_in_its_minute(stats_prefix, fixed_clock):
    finish(ago=0)
    finish(ago=60, status="failed", error_class="dns")
    finish(ago=61, status="failed", error_class="dns")

    series = stats_per_minute(minutes=5)

    assert [start for start, _ in series] == [(int(NOW) // 60 - n) * 60 for n in (4, 3, 2, 1, 0)]
    assert [values for _, values in series] == [{}, {}, {}, {"failed": 2}, {"succeeded": 1}]


def test_buckets_expire_after_the_longest_window_and_lifetime_stays(stats_prefix, fixed_clock):
    finish(ago=0)
    client = get_redis()
    minute_ttl = client.ttl(f"{stats_prefix}:m:{int(NOW) // 60}")

    assert 86400 < minute_ttl <= 86400 + 7200
    assert 86400 < client.ttl(f"{stats_prefix}:h:{int(NOW) // 3600}") <= 86400 + 7200
    assert client.ttl(f"{stats_prefix}:total") == -1


def test_duration_histogram_buckets_live_in_the_lifetime_counters(stats_prefix, fixed_clock):
    finish(ago=0, duration=0.5)
    finish(ago=0, duration=4.0)
    finish(ago=0, duration=99999.0)

    lifetime = stats_windows(windows=())["lifetime"]["version"]["link/1.0.0"]

    assert (lifetime["dur_le:1"], lifetime["dur_le:5"], lifetime["dur_le:+Inf"]) == (1, 1, 1)
    assert lifetime["duration"] == pytest.approx(100003.5)


def test_throttle_numbers_ignore_missing_and_odd_values():
    assert throttle_numbers({}) == {"waits": 0, "wait_seconds": 0, "delayed": 0}
    assert throttle_numbers({"throttle/waits": True, "throttle": "x"})["waits"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_finished_job_is_logged_and_counted(stats_prefix, builtins, caplog):
    from crawls.models import CrawlJob
    from ops.services import job_finished_record
    from registry.models import Scraper

    started = datetime.fromtimestamp(NOW, tz=UTC)
    job = CrawlJob.objects.create(
        url="https://www.shop.test/list",
        scraper=Scraper.objects.get(name="link"),
        status="failed",
        error_class="http_4xx",
        started_at=started,
        finished_at=started + timedelta(seconds=2.5),
        stats={"pages": 2, "status_codes": {"404": 2}},
        worker="crawl@box/42",
    )

    with caplog.at_level(logging.INFO, logger="trawl.jobs"):
        job_finished_record(job=job)

    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("job finish"))
    fields = dict(part.split("=", 1) for part in line.removeprefix("job finish ").split())
    assert fields["id"] == str(job.pk)
    assert (fields["version"], fields["domain"], fields["outcome"]) == ("link/none", "www.shop.test", "failed")
    assert (fields["error_class"], fields["duration"], fields["pages"]) == ("http_4xx", "2.500", "2")
    lifetime = summarize(domain_totals(kind="domain", names=["www.shop.test"])["www.shop.test"])
    assert lifetime["jobs"]["failed"] == 1
    assert lifetime["status_codes"] == {"404": 2}


@pytest.mark.django_db(transaction=True)
def test_a_queued_job_cancelled_is_counted_once_as_cancelled(stats_prefix, builtins):
    from crawls.models import CrawlJob
    from crawls.services import job_cancel
    from registry.models import Scraper

    job = CrawlJob.objects.create(url="https://cancel.test/", scraper=Scraper.objects.get(name="link"))

    job_cancel(job=job)

    lifetime = summarize(domain_totals(kind="domain", names=["cancel.test"])["cancel.test"])
    assert lifetime["jobs"] == {"succeeded": 0, "failed": 0, "cancelled": 1, "dead": 0, "total": 1}
    assert lifetime["error_classes"] == {"cancelled": 1}


def test_lifetime_counters_gain_no_field_per_domain_and_forget_idle_domains(stats_prefix, settings):
    for number in range(20):
        finish(ago=0, domain=f"d{number}.test")
    client = get_redis()

    fields = client.hkeys(stats._key("total"))
    assert fields and not any("d1.test" in field for field in fields), "the lifetime hash holds no domain"
    assert domain_totals(kind="domain", names=["d3.test"])["d3.test"]["jobs:succeeded"] == 1
    assert 0 < client.ttl(stats.domain_total_key("domain", "d3.test")) <= settings.TRAWL_STATS_DOMAIN_TTL
    assert client.zcard(stats._key("domains", "domain")) == 20

    later = NOW + settings.TRAWL_STATS_DOMAIN_TTL + 60  # every domain idle for longer than the TTL; one job ends
    stats_record(
        at=later, dimensions=job_dimensions(domain="new.test", scraper="link", version="1"), numbers={"pages": 1}
    )

    assert client.zrange(stats._key("domains", "domain"), 0, -1) == ["new.test"], "idle domains left the ranking"
    assert client.zcard(stats._key("domains_seen", "domain")) == 1
