"""Adaptive politeness end to end: two real workers crawl a site that degrades with the rate it is hit.

The site counts the requests it got in the last second (r). Above KNEE its latency grows with r; above ERRORS_FROM a
share of its answers are 503s (more the harder it is hit). With the controller on, the two workers must settle
below ERRORS_FROM and the site must see (almost) no errors once they have; with it off (`adaptive: false`) they must
hold the configured rate, errors and all.
"""

from __future__ import annotations

import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.e2e.test_throttle_e2e import finished, localhost_rule, submit, two_workers  # noqa: F401
from tests.throttling.test_buckets import most_in_any_window

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RATE = 10.0  # the configured rate, requests per second for the whole cluster
KNEE = 4.0  # req/s the site serves at full speed
ERRORS_FROM = 5.0  # req/s above which it starts answering 503
LEAVES = 70  # pages each hub links to; one crawl per hub


class DegradingSite:
    """`/<hub>/0` links to `/<hub>/1..LEAVES`. Hubs and robots.txt never fail, so every run crawls every leaf."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, int]] = []  # (time, status)
        self.lock = threading.Lock()
        self.random = random.Random(17)
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                delay, status = site.admit(self.path)
                time.sleep(delay)
                body = site.page(self.path).encode() if status == 200 else b"overloaded"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://localhost:{self.server.server_address[1]}"

    def admit(self, path: str) -> tuple[float, int]:
        now = time.time()
        with self.lock:
            rate = 1 + sum(1 for at, _ in self.arrivals if now - 1.0 < at)
            error_share = min(0.9, (rate - ERRORS_FROM) / 10) if rate > ERRORS_FROM else 0.0
            fails = path != "/robots.txt" and not path.endswith("/0") and self.random.random() < error_share
            status = 503 if fails else 200
            self.arrivals.append((now, status))
        return (0.0 if fails else 0.02 + 0.08 * max(0.0, rate - KNEE)), status

    @staticmethod
    def page(path: str) -> str:
        if path == "/robots.txt":
            return "User-agent: *\nDisallow:\n"
        hub, _, number = path.strip("/").partition("/")
        links = "".join(f'<a href="/{hub}/{n}">{n}</a> ' for n in range(1, LEAVES + 1)) if number == "0" else ""
        return f"<html><title>{hub} {number}</title><body>{links}</body></html>"

    def between(self, since: float, until: float) -> list[tuple[float, int]]:
        with self.lock:
            return [(at, status) for at, status in self.arrivals if since <= at < until]

    def __enter__(self) -> DegradingSite:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def crawl_both(api, site: DegradingSite, workers) -> tuple[float, float]:
    """Two crawls at once, one per worker; returns when the site saw their first and last requests."""
    ids = [submit(api, f"{site.url}/{hub}/0", maxdepth=1) for hub in ("a", "b")]
    jobs = [finished(job_id, workers) for job_id in ids]
    assert [job.status for job in jobs] == ["succeeded", "succeeded"], [job.error_message for job in jobs]
    assert len({job.worker for job in jobs}) == 2, "each job should run on its own worker"
    times = [at for at, _ in site.between(0, float("inf"))]
    return min(times), max(times)


def test_adaptive_on_settles_below_the_sites_breaking_point(api, builtins, localhost_rule, two_workers):  # noqa: F811
    localhost_rule(rate=RATE, burst=1, ip_rate=RATE, ip_burst=1)
    with DegradingSite() as site:
        first, last = crawl_both(api, site, two_workers)

    settled = site.between(first + 10, last)
    seconds = last - (first + 10)
    assert seconds > 5, "the crawl should last well past the controller's first decisions"
    rate = len(settled) / seconds
    errors_settled = sum(1 for _, status in settled if status != 200)
    everything = site.between(0, float("inf"))
    errors = sum(1 for _, status in everything if status != 200)
    print(f"adaptive on: settled at {rate:.2f} req/s, {errors_settled} errors then, {errors}/{len(everything)} in all")
    assert rate < ERRORS_FROM, f"settled at {rate:.2f} req/s, at or above the site's breaking point"
    assert errors_settled <= 2, f"{errors_settled} errors after settling"
    assert errors / len(everything) < 0.1


def test_adaptive_off_holds_the_configured_rate(api, builtins, localhost_rule, two_workers):  # noqa: F811
    localhost_rule(rate=RATE, burst=1, ip_rate=RATE, ip_burst=1, adaptive=False)
    with DegradingSite() as site:
        first, last = crawl_both(api, site, two_workers)

    everything = site.between(0, float("inf"))
    middle = site.between(first + 2, last - 2)
    rate = len(middle) / (last - first - 4)
    errors = sum(1 for _, status in everything if status != 200)
    print(f"adaptive off: {rate:.2f} req/s, {errors}/{len(everything)} errors")
    assert rate > 0.8 * RATE, f"held only {rate:.2f} req/s of the configured {RATE}"
    assert most_in_any_window([at for at, _ in everything], 1.0) <= RATE + 2
    assert errors / len(everything) > 0.2
