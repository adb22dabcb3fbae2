"""What a spider developer reads after an ordinary job, end to end through a real worker: a log with no WARNING, one
record per line with its continuation lines kept, stats whose names say what they count, and the job linking its log."""

from __future__ import annotations

import re

import pytest

from ops.joblog import records_of

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ ")


@pytest.fixture
def ordinary_job(api, builtins, site, job_waiter) -> dict:
    created = api.post("/api/jobs/", {"url": f"{site.url}/index.html", "options": {"maxdepth": 1}}, format="json")
    assert created.status_code == 201, created.content
    job = job_waiter(created.json()["id"])
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

    assert stats["blocks"]["checked"] == stats["pages"] > 0, stats
    assert stats["blocks"].get("blocked", 0) == 0 and "responses" not in stats["blocks"], stats
    assert "wait_seconds" not in stats["throttle"], stats
    assert ordinary_job["log_url"].endswith(f"/api/jobs/{ordinary_job['id']}/log/")
