"""`max_pages`, `max_items` and `max_seconds` through the REST API and a real worker: counted at the site."""

from __future__ import annotations

import pytest

from tests.sites import LocalSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAGES = 40


@pytest.fixture(scope="module")
def wide_site(tmp_path_factory):
    """40 pages: the index links to the 39 others, so a crawl has many requests in flight at once."""
    root = tmp_path_factory.mktemp("wide")
    (root / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    links = "".join(f'<a href="/p{n}.html">{n}</a>' for n in range(1, PAGES))
    (root / "index.html").write_text(f"<html><title>Index</title><body>{links}</body></html>")
    for n in range(1, PAGES):
        (root / f"p{n}.html").write_text(f"<html><title>Page {n}</title><body>page {n}</body></html>")
    with LocalSite(root) as site:
        yield site


def pages_hit(site) -> int:
    return sum(count for path, count in site.hits.items() if path != "/robots.txt")


def bounded_job(api, job_waiter, url: str, **options):
    """A job of `url` with these options, through the API, once it ended; it must have succeeded."""
    response = api.post("/api/jobs/", {"url": url, "options": options}, format="json")
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"])
    assert job.status == "succeeded", job.error_message
    return job


def test_max_pages_5_fetches_at_most_5_pages_and_succeeds(api, builtins, wide_site, job_waiter):
    wide_site.hits.clear()
    job = bounded_job(api, job_waiter, f"{wide_site.url}/index.html", maxdepth=2, max_pages=5)

    assert job.stats["closed_by"] == "max_pages"
    assert pages_hit(wide_site) <= 5
    assert job.stats["pages"] == 5


def test_max_items_ends_the_job_with_that_many_items(api, builtins, wide_site, job_waiter):
    job = bounded_job(api, job_waiter, f"{wide_site.url}/index.html", maxdepth=2, max_items=3)

    assert job.stats["closed_by"] == "max_items"
    assert api.get(f"/api/jobs/{job.pk}/items/").json()["count"] == 3


def test_max_seconds_ends_the_job_succeeded_after_that_long(api, builtins, wide_site, job_waiter):
    """Scrapy's CLOSESPIDER_TIMEOUT: a chain of pages that take 0.3 s each, 20 deep (6 s at least), given 2 s."""
    job = bounded_job(api, job_waiter, f"{wide_site.url}/slow/0", maxdepth=20, max_seconds=2)

    assert job.stats["closed_by"] == "max_seconds" and job.stats["finish_reason"] == "closespider_timeout"
    assert wide_site.slow_hits() < 21


def test_unbounded_option_is_a_400_naming_it(api, builtins, wide_site):
    response = api.post(
        "/api/jobs/", {"url": f"{wide_site.url}/index.html", "options": {"max_pages": 0}}, format="json"
    )

    assert response.status_code == 400
    assert "max_pages" in response.json()["options"]
