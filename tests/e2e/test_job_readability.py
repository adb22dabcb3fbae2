"""What a spider developer reads after an ordinary job, end to end through a real worker (with the settings `make run`
ships and the production ones): a log with no WARNING, one record per line with its continuation lines kept, stats
whose names say what they count, and the job linking its log."""

from __future__ import annotations

import re

import pytest

from crawls.logs.joblog import records_of
from tests.callbacks.harness import running_alone
from tests.security.conftest import ALLOWED, MODES
from tests.security.hostile_site import HostileSite, page, submit, wait_final
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ ")


@pytest.fixture(params=sorted(MODES))
def ordinary_job(request, api, builtins, settings, django_db_setup, tmp_path) -> dict:
    """A link job of a two-page site, run by a worker with the settings `make run` ships or the production ones."""
    if request.param == "production":  # the web side as the production workers: the guard on, 127.0.0.2 allowed
        settings.TRAWL_BLOCK_PRIVATE_TARGETS, settings.TRAWL_PRIVATE_TARGETS_ALLOWED = True, [ALLOWED]
    worker = Worker(queues="crawls,control,callbacks", concurrency=1, env=dict(MODES[request.param]), log_dir=tmp_path)
    routes = {"/index.html": (200, {}, page("/a.html", "/b.html")), "/a.html": (200, {}, page(title="A"))}
    with HostileSite({**routes, "/b.html": (200, {}, page(title="B"))}) as shop, running_alone(worker):
        job = wait_final(submit(api, url=f"{shop.url}/index.html", options={"maxdepth": 1}), worker)
    assert job.status == "succeeded", (job.error_class, job.error_message)
    return api.get(f"/api/jobs/{job.pk}/").json()


def test_an_ordinary_link_job_logs_no_warning_and_keeps_one_record_per_line(api, ordinary_job):
    log_url = ordinary_job["log_url"]
    text = api.get(log_url).content.decode()
    lines = text.splitlines()
    records = records_of(lines)
    warnings = [line for line in lines if line.split(" ", 2)[1] in ("WARNING", "ERROR", "CRITICAL")]
    dump = next(record for record in records if record.split("\n")[0].endswith(" Dumping Scrapy stats:"))

    print(f"\n{len(lines)} lines, {len(records)} records; the stats dump has {dump.count(chr(10)) + 1} lines")
    assert not warnings, "\n".join(warnings)
    assert all(LINE.match(line) for line in lines), text
    assert "\\n" not in text
    assert dump.count("\n") > 5 and all(" | " in line for line in dump.split("\n")[1:]), dump
    assert re.search(r"\| +'downloader/request_count': \d+,", dump), dump
    tail = api.get(log_url, {"tail": len(records) - records.index(dump)}).content.decode()
    assert tail.startswith(dump + "\n")  # `tail` counts records: the dump's lines come whole
    info = api.get(log_url, {"level": "INFO"}).content.decode()
    assert info == text


def test_an_ordinary_jobs_stats_name_what_they_count(ordinary_job):
    stats = ordinary_job["stats"]

    assert stats["blocks"]["checked"] == stats["pages"] == 3, stats
    assert stats["blocks"].get("blocked", 0) == 0 and "responses" not in stats["blocks"], stats
    assert "wait_seconds" not in stats["throttle"], stats
    assert ordinary_job["log_url"].endswith(f"/api/jobs/{ordinary_job['id']}/log/")
