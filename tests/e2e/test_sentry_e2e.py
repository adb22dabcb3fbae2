"""Errors to Sentry through a real worker process and a real web process (gunicorn, the Procfile's command): a local
HTTP server is the Sentry ingest endpoint."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import brotli
import pytest
import requests

from crawls.services import job_create
from registry.models import Scraper, ScraperVersion
from tests.callbacks.harness import running_alone
from tests.conftest import wait_for_job
from tests.security.test_front_door import Gunicorn
from tests.sites import ServedSite, send_body
from tests.workers import BASE_DIR, Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class SentryIngest(ServedSite):
    """Takes Sentry envelopes (`POST /api/1/envelope/`) and keeps their events."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = self.headers.get("Content-Encoding", "")
                body = (
                    gzip.decompress(body)
                    if encoding == "gzip"
                    else brotli.decompress(body)
                    if encoding == "br"
                    else body
                )
                with ingest.lock:
                    ingest.bodies.append(body)
                send_body(self, 200, "{}", {"Content-Type": "application/json"})

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    @property
    def dsn(self) -> str:
        return f"http://publickey@127.0.0.1:{self.port}/1"

    def raw(self) -> bytes:
        with self.lock:
            return b"\n".join(self.bodies)

    def events(self) -> list[dict]:
        with self.lock:
            bodies = list(self.bodies)
        found = []
        for body in bodies:
            lines = body.split(b"\n")[1:]  # the envelope's header first, then (item header, payload) pairs
            for header, payload in zip(lines[::2], lines[1::2], strict=False):
                if header and json.loads(header).get("type") == "event":
                    found.append(json.loads(payload))
        return found


@pytest.fixture
def ingest():
    with SentryIngest() as served:
        yield served


@pytest.fixture
def broken(builtins):
    scraper = Scraper.objects.create(name="broken")
    ScraperVersion.objects.create(
        scraper=scraper, version="0.1.0", spider="tests.fixtures.spiders.RaisingSpider", is_default=True
    )
    return scraper


def test_a_spider_error_reaches_sentry_tagged_with_job_scraper_and_version(ingest, broken, site, tmp_path):
    worker = Worker(env={"SENTRY_DSN": ingest.dsn}, log_dir=tmp_path)
    with running_alone(worker):
        job = job_create(url=f"{site.url}/product-1.html", scraper="broken")
        ended = wait_for_job(job.pk)
        deadline = time.monotonic() + 30
        while not [event for event in ingest.events() if event.get("tags", {}).get("job_id") == str(job.pk)]:
            assert time.monotonic() < deadline, (ingest.events(), worker.log_tail())
            time.sleep(0.2)

    assert (ended.status, ended.error_class) == ("failed", "spider_error")
    (event,) = [event for event in ingest.events() if event.get("tags", {}).get("job_id") == str(job.pk)]
    assert {key: event["tags"][key] for key in ("scraper", "version", "error_class")} == {
        "scraper": "broken",
        "version": "0.1.0",
        "error_class": "spider_error",
    }
    assert "selector drifted" in event["message"] or "selector drifted" in json.dumps(event)
    assert not [e for e in ingest.events() if "Spider error processing" in json.dumps(e)], "one event per job"


def test_without_a_dsn_sentry_is_not_even_imported():
    probe = (
        "import os, sys, django; os.environ.pop('SENTRY_DSN', None); "
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'project.settings'; django.setup(); "
        "import project.celery, crawls.services.after_end; print('sentry_sdk' in sys.modules)"
    )
    env = {key: value for key, value in __import__("os").environ.items() if key != "SENTRY_DSN"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=BASE_DIR, env=env, capture_output=True, text=True, check=True
    )

    assert out.stdout.strip() == "False", out.stderr


def test_an_exception_in_a_view_reaches_sentry_tagged_with_the_request_and_without_its_token(
    ingest, requester, tmp_path
):
    job_id = "0d5c1e8e-9a49-4e4f-a3a5-3d2f1b0e7c11"
    env = {"SENTRY_DSN": ingest.dsn, "DJANGO_SETTINGS_MODULE": "tests.e2e.sentry_web_settings"}
    with Gunicorn(env, tmp_path) as web:
        answer = requests.get(
            f"{web.url}/api/jobs/{job_id}/raising/?page=2",
            headers={"Authorization": f"Token {requester.plain_token}", "Cookie": "sessionid=cookie-secret"},
            timeout=30,
        )
        deadline = time.monotonic() + 30
        while not [event for event in ingest.events() if "a bug in a view" in json.dumps(event)]:
            assert time.monotonic() < deadline, (ingest.events(), web.log())
            time.sleep(0.2)

    assert answer.status_code == 500
    (event,) = [event for event in ingest.events() if "a bug in a view" in json.dumps(event)]
    assert {key: event["tags"].get(key) for key in ("requester", "view", "job_id")} == {
        "requester": requester.name,
        "view": "RaisingView.get",
        "job_id": job_id,
    }, event["tags"]
    assert event["request"]["method"] == "GET" and event["request"]["url"].endswith(f"/api/jobs/{job_id}/raising/")
    assert event["request"]["query_string"] == "page=2"
    assert event["exception"]["values"][-1]["type"] == "RuntimeError"
    headers = event["request"].get("headers", {})
    assert headers.get("Authorization") in (None, "[Filtered]") and headers.get("Cookie") in (None, "[Filtered]")
    sent = ingest.raw()
    assert requester.plain_token.encode() not in sent and b"cookie-secret" not in sent
