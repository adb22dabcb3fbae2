from datetime import timedelta

import pytest
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus, Source
from crawls.services.sources import sources_dispatch_due
from registry.models import Scraper


@pytest.fixture
def link(builtins):
    return Scraper.objects.get(name="link")


def make_source(scraper, n, **fields):
    return Source.objects.create(url=f"http://shop.test/list-{n}.html", scraper=scraper, **fields)


def test_due_sources_are_booked_and_get_one_job_each(link):
    now = timezone.now()
    due = [make_source(link, n, next_sync_at=now - timedelta(seconds=1), current_interval=600) for n in range(3)]
    later = make_source(link, 9, next_sync_at=now + timedelta(hours=1))
    disabled = make_source(link, 10, next_sync_at=now, enabled=False)

    jobs = sources_dispatch_due(now=now)

    assert sorted(job.source_id for job in jobs) == sorted(source.pk for source in due)
    for source in due:
        source.refresh_from_db()
        assert source.next_sync_at == now + timedelta(seconds=600)
    assert not CrawlJob.objects.filter(source__in=[later, disabled]).exists()


def test_source_with_a_job_still_active_is_not_dispatched_again(link):
    now = timezone.now()
    source = make_source(link, 1, next_sync_at=now)
    (first,) = sources_dispatch_due(now=now)

    assert sources_dispatch_due(now=now + timedelta(hours=2)) == []
    CrawlJob.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
    assert [job.source_id for job in sources_dispatch_due(now=now + timedelta(hours=2))] == [source.pk]
