"""Sources: creating and changing them, defaults and bounds, refusals naming the field."""

from __future__ import annotations

import pytest
from django.utils import timezone

from project.errors import TrawlError
from sources.models import Source
from sources.services.sources import source_create, source_update
from tests.sources.sources_helpers import free_lease

__all__ = ["free_lease"]  # an autouse fixture


def test_a_sitemap_source_gets_the_sitemap_scraper_and_discovery_by_default(builtins):
    source = source_create(url="http://shop.test/sitemap.xml", kind="sitemap")

    assert (source.scraper.name, source.strategy, source.current_interval) == ("sitemap", "discovery", 3600)
    assert source.next_sync_at <= timezone.now()


def test_bounds_follow_a_refresh_interval_outside_the_defaults(builtins):
    source = source_create(url="http://shop.test/", refresh_interval=120)

    assert (source.min_interval, source.refresh_interval, source.max_interval) == (120, 120, 86400)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"window_start_hour": 22}, "window_end_hour"),
        ({"window_start_hour": 5, "window_end_hour": 5}, "window_end_hour"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"min_interval": 7200, "refresh_interval": 3600}, "refresh_interval"),
        ({"min_interval": 5, "refresh_interval": 60}, "min_interval"),
        ({"config": {"children": {"scraper": "nope"}}}, "scraper"),
        ({"url": "ftp://shop.test/"}, "url"),
    ],
)
def test_bad_sources_are_refused_naming_the_field(builtins, fields, field):
    with pytest.raises(TrawlError) as refused:
        source_create(**{"url": "http://shop.test/", **fields})

    assert refused.value.field == field
    assert not Source.objects.exists()


def test_the_same_url_twice_for_one_scraper_is_refused(builtins):
    source_create(url="http://shop.test/")

    with pytest.raises(TrawlError, match="already has a source"):
        source_create(url="http://shop.test/")


def test_a_new_refresh_interval_restarts_the_adaptation(builtins):
    source = source_create(url="http://shop.test/", refresh_interval=3600)
    Source.objects.filter(pk=source.pk).update(current_interval=20_000)

    updated = source_update(source=source, refresh_interval=1800)
    kept = source_update(source=updated, priority=80)

    assert updated.current_interval == 1800
    assert (kept.current_interval, kept.priority) == (1800, 80)
