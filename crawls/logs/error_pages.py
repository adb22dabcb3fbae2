"""The responses a spider raised on (runtime/watch/error_pages.py): stored with the job, and a kept page's body as the
API and the admin send it: the site's bytes, never rendered as the site's HTML.

The page comes from whatever site the job crawled: served as HTML from Trawl's origin it would run its scripts there
(with the reader's session). So it is text/plain, `nosniff`, and sandboxed by CSP; its own content type is a header.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.http import HttpResponse

from crawls.models import CrawlJob, JobErrorPage
from runtime.watch.error_pages import ErrorPage


def error_page_response(page: JobErrorPage) -> HttpResponse:
    response = HttpResponse(bytes(page.body), content_type="text/plain")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["X-Trawl-Content-Type"] = page.content_type.encode("ascii", "replace").decode("ascii")
    response["X-Trawl-Size"] = str(page.size)
    return response


def job_error_pages_store(*, job: CrawlJob, kept: list[ErrorPage]) -> int:
    """Keep what fits under TRAWL_ERROR_PAGES_MAX for the job (its attempts and shards together); a number a shard
    already stored is not stored twice."""
    if not kept:
        return 0
    stored = JobErrorPage.objects.filter(job=job)
    room = settings.TRAWL_ERROR_PAGES_MAX - stored.count()
    taken = set(stored.values_list("number", flat=True))
    rows = [
        JobErrorPage(
            job=job,
            number=page.number,
            url=page.url[:2000],
            status=page.status,
            content_type=page.content_type,
            body=page.body[: settings.TRAWL_ERROR_PAGE_MAX_BYTES],
            size=page.size,
            error=page.error,
            kept_at=datetime.fromtimestamp(page.kept_at, tz=UTC),
        )
        for page in kept
        if page.number not in taken
    ][: max(0, room)]
    JobErrorPage.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
