"""Attack: a requester's own site links, redirects and lists sitemaps to `file://` (the worker's files), `s3://`,
`ftp://` and `data:` — with the `link` and `sitemap` scrapers, through a real worker, under the settings `make run`
ships and the production settings. Nothing but http and https is fetched: no item and no log line carries a
worker-local file's content, and the job counts what was refused (`refused_scheme`). A start URL with another scheme
is a 400 naming `url` wherever a crawl is submitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from crawls.models import CrawlJob
from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import (
    HostileSite,
    exposed,
    page,
    redirect,
    submit,
    wait_final,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MARKER = "TRAWL-WORKER-FILE-7e3b"  # only in the worker-local files below
PASSWD = "root:x:0:"  # the start of /etc/passwd
XML = {"Content-Type": "application/xml"}
OTHER_SCHEMES = [
    "file:///etc/passwd",
    "FILE://127.0.0.1/etc/hostname",
    "s3://bucket/key",
    "ftp://127.0.0.1/",
    "data:,x",
]


@pytest.fixture
def worker_files(tmp_path) -> dict[str, Path]:
    """Files on the worker's machine, as /proc/self/environ or a settings file would be: each holds the marker."""
    html = tmp_path / "secret.html"
    html.write_text(f"<html><title>{MARKER}</title><body>{MARKER}</body></html>")
    xml = tmp_path / "secret.xml"
    xml.write_text(
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://{MARKER}.test/</loc></url></urlset>'
    )
    return {"html": html, "xml": xml}


@pytest.mark.usefixtures("mode_web_settings")
def test_links_redirects_robots_and_sitemaps_to_other_schemes_are_refused_and_counted(
    api, builtins, mode, mode_worker, worker_files
):
    html, xml = (f"file://{ATTACKER_HOST}{worker_files[kind]}" for kind in ("html", "xml"))
    index = "".join(
        f"<sitemap><loc>{loc}</loc></sitemap>"
        for loc in (
            "file:///etc/passwd",
            xml,
            "s3://bucket/sitemap.xml",
            f"ftp://{ATTACKER_HOST}/sitemap.xml",
            "data:application/xml,<urlset/>",
            "REAL",
        )
    )
    routes = {
        # robots.txt itself redirects to a local file: Scrapy fetches it for every host of the crawl.
        "/robots.txt": redirect("file:///etc/passwd"),
        "/page.html": (
            200,
            {},
            page(html, f"ftp://{ATTACKER_HOST}/pub/", "file:///etc/passwd", "s3://b/k", "data:,x", "/next.html"),
        ),
        "/next.html": (200, {}, page(title="Next")),
        "/go": redirect(html),
        "/sitemap_index.xml": (200, XML, f"<sitemapindex>{index}</sitemapindex>"),
        "/real.xml": (200, XML, "<urlset><url><loc>REAL/product.html</loc></url></urlset>"),
    }
    with HostileSite(routes) as site:
        for path in ("/sitemap_index.xml", "/real.xml"):
            status, headers, body = routes[path]
            site.routes[path] = (
                status,
                headers,
                body.replace("REAL", site.url if path == "/real.xml" else f"{site.url}/real.xml"),
            )
        linked = submit(api, url=f"{site.url}/page.html", options={"maxdepth": 1})
        redirected = submit(api, url=f"{site.url}/go")
        mapped = submit(api, url=f"{site.url}/sitemap_index.xml", scraper="sitemap")
        # `selectors` follows every link its config selects, whatever its host: file:///etc/passwd too.
        config = {"item_links": "a", "fields": {"title": "title::text", "text": "body"}}
        selected = submit(api, url=f"{site.url}/page.html", scraper="selectors", options={"config": config})
        jobs = [wait_final(job, mode_worker) for job in (linked, redirected, mapped, selected)]
        linked, redirected, mapped, selected = jobs

    assert linked.status == "succeeded", (linked.error_class, linked.error_message)
    assert linked.stats["pages"] == 2 and linked.stats["items_new"] == 2  # the page and /next.html
    # file:// and ftp:// on the attacker's host (the link spider follows same-host links), and robots.txt's redirect.
    assert linked.stats["refused_scheme"] >= 3, linked.stats
    assert (redirected.status, redirected.error_class) == ("failed", "blocked_target"), redirected.stats
    assert redirected.stats["refused_scheme"] >= 1
    assert mapped.status == "succeeded", (mapped.error_class, mapped.error_message)
    assert mapped.stats["items_new"] == 1  # the one http URL of the one http sitemap
    assert mapped.stats["refused_scheme"] >= 5, mapped.stats  # file ×2, s3, ftp, data (and robots.txt's redirect)
    assert selected.status == "succeeded", (selected.error_class, selected.error_message)
    assert selected.stats["items_new"] == 1  # /next.html, the one http link
    assert selected.stats["refused_scheme"] >= 5, selected.stats  # file ×2, ftp, s3, data (and robots.txt's redirect)
    for job in jobs:
        seen = exposed(api, str(job.pk))
        assert MARKER not in seen and PASSWD not in seen, f"a worker-local file reached the requester ({mode})"
    print(
        f"\n[{mode}] refused_scheme: link job {linked.stats['refused_scheme']}, redirect job "
        f"{redirected.stats['refused_scheme']}, sitemap job {mapped.stats['refused_scheme']}, selectors job "
        f"{selected.stats['refused_scheme']}"
    )


@pytest.mark.parametrize("url", OTHER_SCHEMES)
def test_a_start_url_with_another_scheme_is_a_400_naming_url_wherever_a_crawl_is_submitted(
    api, admin_api, builtins, mode_web_settings, url
):
    job = api.post("/api/jobs/", {"url": url}, format="json")
    assert job.status_code == 400 and "url" in job.json(), job.content

    batch = api.post("/api/batches/", {"jobs": [{"url": "http://shop.test/"}, {"url": url}]}, format="json")
    assert batch.status_code == 400 and "url" in json.dumps(batch.json()), batch.content

    source = admin_api.post("/api/sources/", {"url": url, "kind": "product"}, format="json")
    assert source.status_code == 400 and "url" in source.json(), source.content

    with pytest.raises(CommandError, match=r"^url: "):
        call_command("crawl", url)
    assert not CrawlJob.objects.exists()
