"""Attacks by an ordinary requester's rendered pages on what the worker holds and sends, through a real production
worker (guard on) and the machine's Chromium:

- a page whose scripts build an HTML far above TRAWL_RENDER_MAXSIZE is not read (the spider never gets it);
- a link to a download, and a popup the page opens, are neither stored nor kept;
- with a proxy asking for credentials configured, a rendered page leaves through it and its origin never sees
  `Proxy-Authorization`;
- a requester naming a proxy group it may not use is refused with a 400 naming the field.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from crawls.models import Batch, CrawlJob
from tests.security.hostile_site import exposed, submit, wait_final
from tests.security.render_site import ForwardProxy, RecordingSite, render_worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["render_worker"]  # fixture

MARKER = "TRAWL-RENDER-BOUNDS-5e21"
HUGE_CHARS = 40 * 2**20  # above TRAWL_RENDER_MAXSIZE's 32 MiB default


@pytest.fixture
def mode() -> str:
    return "production"


def start_page(*links: str, script: str = "") -> str:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><head><title>start</title></head><body>{anchors}<script>{script}</script></body></html>"


def test_a_rendered_page_built_far_above_the_size_bound_is_not_read(api, builtins, render_worker, settings):
    huge = f"""<html><head><title>huge</title></head><body><script>
// A comment: in the page's HTML, never laid out (40 MiB of text to lay out would time the page out instead).
document.body.appendChild(document.createComment("{MARKER}" + "A".repeat({HUGE_CHARS})));
</script></body></html>"""
    routes = {"/": (200, {}, start_page("/huge")), "/huge": (200, {}, huge)}
    with RecordingSite(routes) as site:
        job = wait_final(submit(api, url=f"{site.url}/", options={"render": True, "maxdepth": 1}), render_worker)

    stats = job.stats
    print(f"\nhuge page: bytes {stats['bytes']}, errors {stats['download_errors']}, render {stats['render']}")
    assert site.hits("/huge") == 1  # it was rendered
    assert job.stats["render"].get("body_too_large") == 1
    assert job.stats["bytes"] < settings.TRAWL_RENDER_MAXSIZE
    assert job.stats["items"] == 1  # the start page's only
    assert MARKER not in exposed(api, str(job.pk))


def test_a_download_link_and_a_popup_are_neither_stored_nor_kept(api, builtins, render_worker):
    payload = (MARKER + "B" * 1000) * 2000  # 2 MB
    download = {"Content-Type": "application/octet-stream", "Content-Disposition": 'attachment; filename="f.bin"'}
    popup = f"<html><title>{MARKER}</title><body>{MARKER}</body></html>"
    routes = {
        "/": (
            200,
            {},
            start_page("/export", script='window.open("/popup"); window.open("/popup2", "_blank", "noopener");'),
        ),
        "/export": (200, download, payload),
        "/popup": (200, {}, popup),
        "/popup2": (200, {}, popup),
    }
    with RecordingSite(routes) as site:
        job = wait_final(submit(api, url=f"{site.url}/", options={"render": True, "maxdepth": 1}), render_worker)

    stats = job.stats
    print(f"\ndownload/popups: bytes {stats['bytes']}, errors {stats['download_errors']}, render {stats['render']}")
    assert site.hits("/export") == 1  # the download was asked for
    assert job.stats["render"]["pages"] >= 1
    assert site.hits("/popup") == 0 and site.hits("/popup2") == 0  # popups load nothing
    assert job.stats["render"]["popups_closed"] == 2
    assert job.stats["bytes"] < len(payload)  # the file was never read into the crawl
    assert job.stats["pages"] == 1
    assert MARKER not in exposed(api, str(job.pk))


@pytest.mark.parametrize("mode", ["make_run", "production"])
def test_a_rendered_page_goes_through_the_crawls_proxy_and_never_sends_its_credentials_to_the_origin(
    api, builtins, render_worker
):
    """The crawl's proxy pool holds one proxy asking for credentials. The rendered page and its own requests must
    leave through it (under `make run` straight from Chromium, under production through the crawl's guard proxy, which
    asks the crawl's proxy for the checked address), and the origin must never see the credentials."""
    from throttling.models import Proxy

    routes = {"/": (200, {}, start_page(script='fetch("/xhr");')), "/xhr": (200, {}, "ok")}
    with RecordingSite(routes) as site, ForwardProxy("trawl", MARKER) as proxy:
        Proxy.objects.create(url=f"http://trawl:{MARKER}@{proxy.host}:{proxy.port}", egress_label="proxied", group="")
        job = wait_final(
            submit(api, url=f"{site.url}/", options={"render": True, "wait_for": "networkidle"}), render_worker
        )

    print(f"\norigin saw {[path for path, _ in site.requests]}; the proxy was asked {proxy.asked}")
    assert job.status == "succeeded", job.error_message
    assert {"/", "/xhr"} <= {path for path, _ in site.requests}, "the page was not rendered"
    assert [path for path, headers in site.requests if "proxy-authorization" in headers] == []
    assert all(MARKER not in value for _, headers in site.requests for value in headers.values())
    # Every request reached the site through the crawl's proxy, with its credentials.
    assert [path for path, headers in site.requests if headers.get("via") != "1.1 test-proxy"] == []
    assert {urlsplit(target).path for target, authorized in proxy.asked if authorized} >= {"/", "/xhr"}


def test_a_requester_may_not_name_a_proxy_group_that_is_not_public(api, admin_api, builtins, settings):
    settings.TRAWL_PROXY_GROUPS_PUBLIC = ["shared"]
    url = "http://127.0.0.2:8/"
    refused = api.post("/api/jobs/", {"url": url, "options": {"config": {"proxy_group": "residential"}}}, format="json")
    assert refused.status_code == 400, refused.content
    assert "options" in refused.json() and "proxy_group" in str(refused.json()["options"])
    batch = {"jobs": [{"url": url}, {"url": url, "options": {"config": {"proxy_group": "residential"}}}]}
    assert api.post("/api/batches/", batch, format="json").status_code == 400
    assert not CrawlJob.objects.exists() and not Batch.objects.exists()  # nothing partial
    allowed = api.post("/api/jobs/", {"url": url, "options": {"config": {"proxy_group": "shared"}}}, format="json")
    assert allowed.status_code == 201, allowed.content
    # An admin's job names any group (the admin chose it for the source or job it runs).
    admins = admin_api.post(
        "/api/jobs/", {"url": url, "options": {"config": {"proxy_group": "residential"}}}, format="json"
    )
    assert admins.status_code == 201, admins.content
