"""bench/density.py still runs end to end at a test's size: plain Scrapy over several local sites in one process, and
real Trawl workers crawling them as jobs (one crawl per process; several per process where the checkout has it),
against a database and a Redis of their own, both gone afterwards: on the test run's Redis, the bench's workers would
take other tests' crawl messages from the shared queue (and those tests' workers the bench's)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.faults_stack import private_redis  # noqa: F401 - a fixture
from tests.postgres import SERVER, postgres_answers

ROOT = Path(__file__).resolve().parents[2]
SITES, PAGES = 3, 4


@pytest.mark.skipif(not postgres_answers(), reason=f"no PostgreSQL at {SERVER}")
def test_every_setup_crawls_every_page_of_every_site_and_the_figures_compare_them_to_plain_scrapy(
    private_redis,  # noqa: F811
):
    name = f"trawl_bench_density_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "bench/density.py", "--sites", str(SITES), "--pages", str(PAGES), "--processes", "2"]
    command += ["--setups", "scrapy,trawlk", "--database-url", f"{SERVER}/{name}"]
    command += ["--redis-url", private_redis.url, "--timeout", "240"]
    # Its own process group: a bench cut short (pytest-timeout, Ctrl-C) leaves no worker or site server behind.
    bench = subprocess.Popen(
        command,
        cwd=ROOT,
        env=bench_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = bench.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
        import psycopg

        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    assert bench.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    setups = {row["setup"]: row for row in summary["setups"]}
    expected = {"scrapy"} | ({"trawlk"} if hasattr(settings, "TRAWL_CRAWLS_PER_PROCESS") else set())
    assert set(setups) == expected
    for row in setups.values():
        assert row["pages_lost"] == 0 and row["jobs_failed"] == 0, row
        assert row["pages"] == SITES * PAGES and row["pages_served"] >= SITES * PAGES, row
        assert row["pages_per_s"] > 0 and row["peak_rss_mib"] > 0 and row["cpu_ms_per_page"] > 0, row
    assert setups["trawlk"]["rss_ratio"] > 0 and setups["trawlk"]["cpu_ratio"] > 0
    assert setups["trawlk"]["peak_db_connections"] >= 1


def bench_env() -> dict[str, str]:
    """This process's environment without a broker or result store a test set for itself: the bench's Redis only."""
    return {name: value for name, value in os.environ.items() if not name.startswith("CELERY_")}
