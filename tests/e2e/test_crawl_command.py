"""`manage.py crawl URL --wait` as an operator runs it: a separate process, the tests' database, a real worker."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command

from crawls.management.commands.crawl import progress_line
from crawls.models import CrawlJob
from demo.generate import generate_site
from demo.serve import DemoServer
from tests import workers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_shop(tmp_path):
    with DemoServer(tmp_path / "site") as server:
        generate_site(server.root, server.url, categories=1, products_per_category=4, per_page=2)
        call_command("seed_demo", base_url=server.url, credentials=tmp_path / "credentials.json", stdout=io.StringIO())
        yield server


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def crawl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": workers.test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "crawl", *args, "--interval", "0.2", "--timeout", str(timeout - 10)],
        cwd=workers.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_crawl_wait_exits_0_when_the_demo_crawl_succeeds(demo_shop, crawl_worker):
    done = crawl(f"{demo_shop.url}/index.html", "--scraper", "demo_shop", "--version", "1.0.0", "--wait")

    assert done.returncode == 0, done.stdout + done.stderr
    job = CrawlJob.objects.get()
    assert (job.status, job.version.version, job.stats["items_new"]) == ("succeeded", "1.0.0", 4)
    lines = done.stdout.splitlines()
    progress = [line for line in lines[1:-1] if " pages " in line]
    assert lines[0] == f"job {job.pk} queued: {demo_shop.url}/index.html (scraper demo_shop, priority 50)"
    pages = job.stats["pages"]
    # Work done, not time used: all of it at the end, and the version that ran it.
    assert progress[-1].startswith(f"succeeded demo_shop 1.0.0 (stable)  pages {pages} of {pages}  items 4 (4 new")
    assert "throttle delay " in progress[-1] and "waits" not in progress[-1]
    assert lines[-1].startswith(f"job {job.pk} succeeded in ")
    assert "4 items (4 new, 0 changed, 0 unchanged)" in lines[-1]


def test_crawl_wait_exits_non_zero_when_the_crawl_fails(builtins, crawl_worker):
    done = crawl(f"http://127.0.0.1:{closed_port()}/", "--wait")

    job = CrawlJob.objects.get()
    assert done.returncode == 1, done.stdout + done.stderr
    assert (job.status, job.error_class) == ("failed", "connection")
    assert f"job {job.pk} failed" in done.stderr and "connection" in done.stderr


def test_crawl_refuses_bad_input_without_creating_a_job(builtins):
    done = crawl("ftp://example.test/", timeout=60)

    assert done.returncode == 2
    assert "url" in done.stderr
    assert not CrawlJob.objects.exists()


def test_crawl_without_wait_prints_the_job_id(builtins, job_waiter):
    done = crawl(f"http://127.0.0.1:{closed_port()}/", "--priority", "90", timeout=60)

    assert done.returncode == 0, done.stderr
    job = CrawlJob.objects.get(priority=90)
    assert done.stdout.strip() == str(job.pk)
    assert job_waiter(job.pk).status == "failed"  # it was queued for real (and leaves no message behind)


def test_progress_line_shows_version_work_done_items_and_the_crawls_throttle_delay():
    stats = {"pages": 12, "queued": 28, "items_new": 5, "items_changed": 2, "items_unchanged": 1}
    # 1527 waits adding up to 65.5 s over concurrent requests, but the crawl was held back for 4.2 s of its 6.
    stats |= {"throttle": {"waits": 1527, "wait_seconds_total": 65.5, "held_seconds": 4.2}}

    line = progress_line(status="running", version="shop 1.1.0 (canary)", stats=stats, elapsed=150)

    assert line == (
        "running   shop 1.1.0 (canary)  pages 12 of 40  items 8 (5 new, 2 changed)  throttle delay 4.2 s  2:30"
    )
    assert progress_line(status="queued", version="shop (routing)", stats={}, elapsed=0).startswith(
        "queued    shop (routing)  pages 0 of 0  items 0"
    )


def test_crawl_wait_on_a_terminal_draws_a_rich_bar_of_work_done(demo_shop, crawl_worker):
    """Under a pseudo-terminal, as a person runs it: a bar of pages done out of pages known, with the version."""
    import pty
    import select

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": workers.test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "COLUMNS": "160",
    }
    command = [sys.executable, "manage.py", "crawl", f"{demo_shop.url}/index.html", "--scraper", "demo_shop"]
    command += ["--version", "1.0.0", "--wait", "--timeout", "100"]
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        command, cwd=workers.BASE_DIR, env=env, stdin=secondary, stdout=secondary, stderr=secondary
    )
    os.close(secondary)
    screen = b""
    try:
        while True:
            ready, _, _ = select.select([primary], [], [], 110)
            if not ready:
                break
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the command exited and closed the terminal
                break
            if not chunk:
                break
            screen += chunk
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        os.close(primary)

    job = CrawlJob.objects.get()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode(errors="replace"))  # colours and cursor moves off
    assert process.returncode == 0, text
    pages = job.stats["pages"]
    assert "demo_shop 1.0.0 (stable)" in text
    assert f"{pages}/{pages} pages" in text, text[-2000:]
    assert "━" in text, "rich draws the bar"
