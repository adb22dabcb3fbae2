"""The fixtures and helpers of the source tests (tests/sources/test_sources_*.py): the dispatch lease freed, the `link`
scraper, a source made directly, one dispatch pass."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from project.redis import get_redis, redis_key
from registry.models import Scraper
from sources.models import Source
from sources.services.sources import DISPATCH_LEASE, sources_dispatch_due


@pytest.fixture(autouse=True)
def free_lease(redis_server, db):  # the key is named after the installation, whose id is in the database
    # A dispatcher killed mid-pass in an earlier run would hold the lease for up to a minute.
    get_redis().delete(redis_key("lease", DISPATCH_LEASE))


@pytest.fixture
def link(builtins):
    return Scraper.objects.get(name="link")


def make_source(scraper, n, **fields):
    return Source.objects.create(url=f"http://shop.test/list-{n}.html", scraper=scraper, **fields)


def dispatch(**kwargs) -> list[CrawlJob]:
    """One dispatch pass; the jobs it created (the pass itself returns their count)."""
    before = set(CrawlJob.objects.values_list("pk", flat=True))
    published = sources_dispatch_due(**kwargs)
    jobs = list(CrawlJob.objects.exclude(pk__in=before))
    assert len(jobs) == published
    return jobs
