"""The attacker's own "public" site (on ATTACKER_HOST, see tests/security/conftest.py) for the scheme and
custom_settings attacks: fixed routes — a page, a redirect, a robots.txt, a sitemap — and a count of every hit;
and what a requester does with it: submit a job, wait for its end, read everything it may read about it."""

from __future__ import annotations

import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

from crawls.models import CrawlJob
from tests.security.conftest import ATTACKER_HOST
from tests.sites import ServedSite, send_body


class HostileSite(ServedSite):
    """`routes` maps a path to (status, headers, body). Paths not listed are 404."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], str]]) -> None:
        self.routes = routes
        self.hits: Counter = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path] += 1
                status, headers, body = site.routes.get(self.path, (404, {}, "not here"))
                send_body(self, status, body, headers)

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=ATTACKER_HOST)


def page(*links: str, title: str = "Page") -> str:
    anchors = "".join(f'<a href="{link}">link</a>' for link in links)
    return f"<html><title>{title}</title><body>{anchors}</body></html>"


def redirect(location: str) -> tuple[int, dict[str, str], str]:
    return 302, {"Location": location}, ""


def submit(client, **spec) -> str:
    response = client.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def wait_final(job_id: str, worker, timeout: float = 180) -> CrawlJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if job.status in ("succeeded", "failed", "cancelled", "dead"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still {job.status}\n{worker.log_tail()}")


def exposed(client, job_id: str) -> str:
    """Everything the requester can read about its job: the job, its items (JSON and JSON lines) and its log."""
    parts = [
        client.get(f"/api/jobs/{job_id}/"),
        client.get(f"/api/jobs/{job_id}/items/"),
        client.get(f"/api/jobs/{job_id}/items/?format=jsonl"),
        client.get(f"/api/jobs/{job_id}/log/"),
    ]
    for response in parts:
        assert response.status_code == 200, response
    return "\n".join(
        (b"".join(response.streaming_content) if response.streaming else response.content).decode()
        for response in parts
    )


def wait_for_build(admin_client, version_url: str, worker, timeout: float = 240) -> dict:
    """A packaged version's detail once its build is over; it must be `ready`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = admin_client.get(version_url).json()
        if body["package_status"] != "building":
            assert body["package_status"] == "ready", body.get("package_log")
            return body
        time.sleep(0.5)
    raise AssertionError(f"{version_url} still building\n{worker.log_tail()}")
