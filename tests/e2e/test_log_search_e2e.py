"""A real worker's crawl raises in its callback; the job's log is searched over REST as it was written."""

from __future__ import annotations

import pytest

from registry.models import Scraper, ScraperVersion

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def broken(builtins):
    scraper = Scraper.objects.create(name="broken")
    ScraperVersion.objects.create(
        scraper=scraper, version="0.1.0", spider="tests.fixtures.spiders.RaisingSpider", is_default=True
    )
    return scraper


def test_log_search_finds_the_spiders_traceback_as_one_record(api, broken, site, job_waiter):
    response = api.post("/api/jobs/", {"url": f"{site.url}/product-1.html", "scraper": "broken"}, format="json")
    job = job_waiter(response.json()["id"])
    url = f"/api/jobs/{job.pk}/log/"

    whole = api.get(url).content.decode().splitlines()
    found = api.get(url, {"q": "SELECTOR DRIFTED", "level": "ERROR"}).content.decode().splitlines()
    last = api.get(url, {"q": "spider opened", "tail": 1}).content.decode().splitlines()

    assert job.status == "failed"
    assert len(found) < len(whole)
    heads = [line for line in found if " | " not in line]
    assert len(heads) == 1 and heads[0].split(" ")[1] == "ERROR", found
    assert found[-1].endswith("| ValueError: selector drifted: no price on page")
    assert any("Traceback (most recent call last)" in line for line in found)
    assert len(last) == 1 and "Spider opened" in last[0]


def test_a_raising_callback_keeps_its_response_linked_from_the_log_and_the_job_page(
    api, admin_client, broken, site, job_waiter
):
    response = api.post("/api/jobs/", {"url": f"{site.url}/product-3.html", "scraper": "broken"}, format="json")
    job = job_waiter(response.json()["id"])
    sent = (site.root / "product-3.html").read_bytes()

    (kept,) = api.get(f"/api/jobs/{job.pk}/error-pages/").json()
    (record,) = api.get(f"/api/jobs/{job.pk}/log/", {"q": "kept the response"}).content.decode().splitlines()
    body = api.get(kept["body_url"])
    job_page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()

    assert job.status == "failed"
    assert (kept["url"], kept["status"], kept["size"]) == (f"{site.url}/product-3.html", 200, len(sent))
    assert kept["error"] == "ValueError: selector drifted: no price on page"
    assert body.content == sent and body["Content-Type"] == "text/plain"
    assert record.endswith(f"/api/jobs/{job.pk}/error-pages/{kept['number']}/")
    assert f"/admin/crawls/crawljob/{job.pk}/error-pages/{kept['number']}/" in job_page
