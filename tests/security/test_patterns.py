"""Catastrophic regexes and regex XPath by an ordinary requester cannot pin a worker (issue 28).

The attacker's site (on 127.0.0.2) serves URLs and texts on which its patterns backtrack for hours under Python's
`re` (test_the_inputs_are_catastrophic_for_pythons_re proves it). Patterns RE2 can run are accepted and run in linear
time: every job ends well within its timeout and its heartbeat never ages past the reaper's stale limit. Patterns RE2
cannot run, and XPath calling `re:` functions, are a 400 naming the field; stored without that check (a job from
before it), the spider refuses them when it starts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import pytest
from django.conf import settings
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from crawls.publish import publish_crawl
from registry.models import Scraper
from tests.security.conftest import ATTACKER_HOST
from tests.sites import ServedSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUN = "a" * 40  # (a+)+$ tries 2**40 ways to split this before giving up
A_TAIL = f"/{RUN}!"  # a URL ending in a run of `a` and then not: `(a+)+$` never matches
X_RUN = "/" + "x" * 40  # (x+x+)+y against forty x and no y
NESTED_A, NESTED_X = r"(a+)+$", r"(x+x+)+y"
# (pattern, text it is matched against on the site): each must stay stuck in Python's `re`.
CATASTROPHIC = [(NESTED_A, A_TAIL), (NESTED_X, X_RUN), (r"^(a+)+$", RUN + "b")]
REGEX_XPATH = r"xpath://p[re:test(text(), '^(a+)+$')]/text()"


class AttackerSite(ServedSite):
    """127.0.0.2: `/` links to the trap URLs and an ordinary page; a sitemap lists trap URLs; `/text` holds RUN+b."""

    def __init__(self) -> None:
        site = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits.append(self.path)
                body, kind = site.page(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=ATTACKER_HOST)

    def page(self, path: str) -> tuple[bytes, str]:
        if path == "/sitemap.xml":
            locs = "".join(f"<url><loc>{self.url}{tail}</loc></url>" for tail in (A_TAIL, X_RUN, "/product-aaaa"))
            xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
            return xml.encode(), "application/xml"
        if path == "/text":
            return f"<html><title>text</title><p>{RUN}b</p></html>".encode(), "text/html"
        if path == "/robots.txt":
            return b"", "text/plain"
        links = "".join(f'<a href="{tail}">{tail[:5]}</a>' for tail in (A_TAIL, X_RUN, "/xxy", "/page-1"))
        return f"<html><title>{path}</title><body>{links}</body></html>".encode(), "text/html"


@pytest.fixture
def attacker_site():
    with AttackerSite() as site:
        yield site


def test_the_inputs_are_catastrophic_for_pythons_re():
    """Each pattern, run by Python's `re` on its text, is still running a second after it started."""
    for pattern, text in CATASTROPHIC:
        script = f"import re, sys; print('go', flush=True); re.search({pattern!r}, {text!r}); print('done')"
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "go"
            time.sleep(1)
            assert child.poll() is None, f"Python's re finished {pattern!r} on {text!r} within a second"
        finally:
            child.kill()
            child.wait()


def submit(api, **spec) -> str:
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def run_watching_heartbeats(job_ids: list[str], *, timeout: float = 300) -> tuple[dict[str, CrawlJob], float]:
    """Wait for the jobs to end, sampling every running job's heartbeat age; (final jobs, worst age seen). Fails as
    soon as a heartbeat is older than the reaper's stale limit: the reaper would take that job for a dead one."""
    deadline, worst, ended = time.monotonic() + timeout, 0.0, {}
    while len(ended) < len(job_ids) and time.monotonic() < deadline:
        for job in CrawlJob.objects.filter(pk__in=job_ids):
            if job.status == JobStatus.RUNNING and job.heartbeat_at:
                worst = max(worst, (timezone.now() - job.heartbeat_at).total_seconds())
                assert worst < settings.TRAWL_REAPER_STALE_SECONDS, f"job {job.pk}'s heartbeat is {worst:.0f}s old"
            elif job.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
                ended[str(job.pk)] = job
        time.sleep(0.2)
    assert len(ended) == len(job_ids), f"jobs still active: {set(job_ids) - set(ended)}"
    return ended, worst


def item_urls(api, job_id: str) -> set[str]:
    return {item["url"] for item in api.get(f"/api/jobs/{job_id}/items/").json()["results"]}


def test_catastrophic_regexes_run_in_linear_time_on_the_worker(
    mode, mode_web_settings, mode_worker, builtins, api, attacker_site
):
    site = attacker_site.url
    jobs = {
        "allow_regex": submit(api, url=f"{site}/", options={"maxdepth": 1, "allow_regex": [NESTED_A, "page-"]}),
        "deny_regex": submit(api, url=f"{site}/", options={"maxdepth": 1, "deny_regex": [NESTED_X, "xxy"]}),
        "sitemap": submit(
            api,
            url=f"{site}/sitemap.xml",
            scraper="sitemap",
            options={"config": {"allow": [NESTED_A], "deny": [NESTED_X]}},
        ),
    }
    ended, worst = run_watching_heartbeats(list(jobs.values()))

    stale = settings.TRAWL_REAPER_STALE_SECONDS
    print(f"\n[{mode}] worst heartbeat age {worst:.1f}s (reaper's stale limit {stale:.0f}s)")
    assert worst < stale
    for place, job_id in jobs.items():
        job = ended[job_id]
        print(f"[{mode}] {place}: {job.status} in {job.duration:.1f}s (timeout {settings.TRAWL_JOB_TIMEOUT}s)")
        assert job.status == JobStatus.SUCCEEDED, (place, job.error_class, job.error_message)
        assert job.duration < settings.TRAWL_JOB_TIMEOUT
    # The patterns did filter, with RE2's answers: `(a+)+$` matches no trap URL, `(x+x+)+y` only /xxy.
    assert item_urls(api, jobs["allow_regex"]) == {f"{site}/", f"{site}/page-1"}
    assert item_urls(api, jobs["deny_regex"]) == {f"{site}/", f"{site}{A_TAIL}", f"{site}{X_RUN}", f"{site}/page-1"}
    assert item_urls(api, jobs["sitemap"]) == {f"{site}/product-aaaa"}
    assert "/xxy" not in attacker_site.hits


@pytest.mark.parametrize(
    ("options", "scraper", "where"),
    [
        ({"allow_regex": [r"(a)\1"]}, "link", ("allow_regex", "0")),
        ({"deny_regex": ["page", r"(?=a)"]}, "link", ("deny_regex", "1")),
        ({"config": {"allow": [r"(?<=a)b"]}}, "sitemap", ("config", "allow", "0")),
        ({"config": {"follow": r"(\w)\1"}}, "sitemap", ("config", "follow", "0")),
        ({"config": {"fields": {"t": REGEX_XPATH}}}, "selectors", ("config", "fields", "t")),
        (
            {"config": {"fields": {"t": "h1"}, "next_page": "xpath://a[set:distinct(.)]"}},
            "selectors",
            ("config", "next_page"),
        ),
    ],
)
def test_patterns_it_cannot_run_in_linear_time_are_a_400_naming_the_field(
    mode_web_settings, builtins, api, options, scraper, where
):
    response = api.post("/api/jobs/", {"url": "http://shop.test/", "scraper": scraper, "options": options}, "json")

    assert response.status_code == 400, response.content
    error = response.json()["options"]
    for key in where:
        error = error[key]
    assert error and isinstance(error[0], str), response.json()
    assert CrawlJob.objects.count() == 0


def test_a_batch_with_one_such_pattern_creates_nothing(mode_web_settings, builtins, api):
    jobs = [{"url": "http://shop.test/"}, {"url": "http://shop.test/", "options": {"allow_regex": [r"(a)\1"]}}]

    response = api.post("/api/batches/", {"jobs": jobs}, format="json")

    assert response.status_code == 400, response.content
    assert "allow_regex" in str(response.json()["jobs"]), response.json()
    assert CrawlJob.objects.count() == 0


def test_stored_jobs_with_such_patterns_are_refused_by_the_spider(
    mode, mode_web_settings, mode_worker, builtins, requester, attacker_site
):
    """Jobs from before the submission check (written straight to the database): the spider refuses at start."""
    cases = {
        "allow_regex": ("link", f"{attacker_site.url}/", {"allow_regex": [r"(a)\1"]}),
        "config.fields.t": ("selectors", f"{attacker_site.url}/text", {"config": {"fields": {"t": REGEX_XPATH}}}),
    }
    jobs = {}
    for field, (scraper, url, options) in cases.items():
        job = CrawlJob.objects.create(
            url=url, scraper=Scraper.objects.get(name=scraper), requester=requester, options=options
        )
        publish_crawl(job=job)
        jobs[field] = str(job.pk)
    ended, worst = run_watching_heartbeats(list(jobs.values()))

    assert worst < settings.TRAWL_REAPER_STALE_SECONDS
    for field, job_id in jobs.items():
        job = ended[job_id]
        print(f"\n[{mode}] stored {field}: {job.status} {job.error_class}: {job.error_message[:160]}")
        assert job.status == JobStatus.FAILED, (field, job.status)
        assert field in job.error_message
    assert "/text" not in attacker_site.hits and not attacker_site.hits  # refused before any request
