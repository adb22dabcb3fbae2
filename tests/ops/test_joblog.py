"""Per-job logs: captured from the process's loggers, capped head and tail, read over REST while running and after."""

from __future__ import annotations

import logging
import re

import pytest

from crawls.logs.joblog import job_log_capture, job_log_forget, job_log_lines, job_log_sink, job_log_store
from crawls.models import CrawlJob, JobLog, JobStatus
from registry.models import Scraper
from runtime.bridge.joblog import MAX_RECORD_LINES
from runtime.bridge.logcapture import job_log_flush, job_log_level
from tests.clients import client_for

pytestmark = pytest.mark.django_db
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ .*$")


@pytest.fixture
def job(requester, builtins):
    job = CrawlJob.objects.create(
        url="http://shop.test/",
        scraper=Scraper.objects.get(name="link"),
        requester=requester,
        status=JobStatus.RUNNING,
    )
    yield job
    job_log_forget(jobs=[(job.pk, 2)])


def test_capture_keeps_scrapy_info_and_the_spiders_own_lines_for_the_job(job):
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("scrapy.core.engine").info("Spider opened")
        logging.getLogger("shop").info("parsed %s products", 12)
        logging.getLogger("scrapy.core.engine").debug("Crawled (200) <GET http://shop.test/>")
    logging.getLogger("shop").info("after the job")

    lines = job_log_lines(job=job)

    assert all(LINE.match(line) for line in lines), lines
    assert [line.split(" ", 1)[1] for line in lines] == [
        "INFO scrapy.core.engine Spider opened",
        "INFO shop parsed 12 products",
    ]
    assert JobLog.objects.get(job=job, attempt=1).records == 2
    assert logging.getLogger("scrapy").level == logging.WARNING, "the attempt must not leave scrapy's level lowered"


def test_a_version_log_level_applies_and_the_console_stays_as_quiet_as_before(job, capsys):
    console = logging.StreamHandler()
    console.setLevel(logging.NOTSET)
    logging.getLogger().addHandler(console)
    try:
        with job_log_capture(job_id=job.pk, attempt=1):
            job_log_level(level="DEBUG")
            logging.getLogger("scrapy.core.engine").debug("Crawled (200)")
    finally:
        logging.getLogger().removeHandler(console)

    assert job_log_lines(job=job)[0].split(" ", 1)[1] == "DEBUG scrapy.core.engine Crawled (200)"
    assert "Crawled (200)" not in capsys.readouterr().err


def test_scrapy_setting_values_never_reach_the_log(job):
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("scrapy.crawler").info(
            "Overridden settings:\n%(settings)s", {"settings": "{'AWS_SECRET_ACCESS_KEY': 'hunter2', 'FEEDS': {}}"}
        )

    (line,) = job_log_lines(job=job)
    assert "hunter2" not in line
    assert line.endswith("Overridden settings (values not logged): AWS_SECRET_ACCESS_KEY, FEEDS")


def test_a_traceback_keeps_its_lines_each_starting_with_the_records_time_and_level(job):
    with job_log_capture(job_id=job.pk, attempt=1):
        try:
            raise ValueError("selector drifted")
        except ValueError:
            logging.getLogger("shop").exception("parse failed")

    (record,) = job_log_lines(job=job)
    first, *rest = record.split("\n")
    head = first.split(" parse failed")[0]
    assert first.endswith(" ERROR shop parse failed") and "\\n" not in record
    assert rest[0] == f"{head} | Traceback (most recent call last):"
    assert rest[-1] == f"{head} | ValueError: selector drifted"
    assert all(LINE.match(line) and line.startswith(f"{head} | ") for line in rest), rest


def multi_line_log(job) -> None:
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("scrapy.core.engine").info("Spider opened")
        logging.getLogger("scrapy.statscollectors").info("Dumping Scrapy stats:\n%s", "{'a': 1,\n 'b': 2}")
        logging.getLogger("shop").warning("no price on\n  two lines")
        logging.getLogger("shop").info("| a single-line record that looks like a continuation")
        logging.getLogger("my spider").info("a logger name with a space")


def test_tail_and_level_count_a_multi_line_record_as_one_record(api, job):
    multi_line_log(job)
    url = f"/api/jobs/{job.pk}/log/"

    text = api.get(url).content.decode()
    tail = api.get(url, {"tail": 3}).content.decode().splitlines()
    warnings = api.get(url, {"level": "WARNING"}).content.decode().splitlines()

    assert all(LINE.match(line) for line in text.splitlines()), text
    assert len(text.splitlines()) == 1 + 3 + 2 + 1 + 1
    assert [line.split(" ", 3)[3] for line in tail] == [
        "no price on",
        "|   two lines",
        "| a single-line record that looks like a continuation",
        "a logger name with a space",
    ]
    assert tail[-1].split(" ")[2] == "my_spider"
    assert [line.split(" ", 3)[3] for line in warnings] == ["no price on", "|   two lines"]


@pytest.mark.parametrize("separator", ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1e", "\x85", "\u2028", "\u2029"])
def test_a_message_cannot_forge_a_record_whatever_line_break_it_uses(api, job, separator):
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("shop").info("price %s", f"12{separator}2026-11-23T09:00:00.000Z ERROR trawl.jobs forged")

    text = api.get(f"/api/jobs/{job.pk}/log/").content.decode()
    lines = text.splitlines()
    assert len(lines) == 2 and lines[1].split(" ", 3)[3] == "| 2026-11-23T09:00:00.000Z ERROR trawl.jobs forged"
    assert api.get(f"/api/jobs/{job.pk}/log/", {"level": "ERROR"}).content == b""


def test_the_records_read_the_same_while_running_and_once_stored(job):
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("scrapy.statscollectors").info("Dumping Scrapy stats:\n%s", "{'a': 1,\n 'b': 2}")
        logging.getLogger("shop").info("next")
        job_log_flush()
        running = job_log_lines(job=job)  # from Redis

    assert [record.count("\n") for record in running] == [2, 0]
    assert JobLog.objects.get(job=job).text  # stored in the database at the end of the attempt
    assert job_log_lines(job=job) == running
    assert job_log_lines(job=job, tail=1) == running[-1:]


def test_a_record_with_thousands_of_lines_is_bounded(job, settings):
    settings.TRAWL_JOB_LOG_LINE_CHARS = 1_000_000
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("shop").info("\n".join(["x"] * 50_001))

    (record,) = job_log_lines(job=job)
    lines = record.split("\n")
    assert len(lines) == 1 + MAX_RECORD_LINES + 1 and lines[-1].endswith(f"| … {50_000 - MAX_RECORD_LINES} more lines")


def test_a_log_stored_before_records_kept_their_lines_reads_as_before(job):
    old = [
        "2026-11-23T09:00:00.000Z ERROR shop parse failed\\nTraceback (most recent call last):",
        "2026-11-23T09:00:01.000Z INFO shop done",
    ]
    JobLog.objects.create(job=job, attempt=1, text="\n".join(old), records=2)

    assert job_log_lines(job=job) == old


def test_a_long_log_keeps_head_and_tail_with_a_marker(job, settings):
    settings.TRAWL_JOB_LOG_MAX_LINES = 10
    sink = job_log_sink(job_id=job.pk, attempt=1)
    lines = [f"2026-11-23T09:00:{n:02d}.000Z INFO shop line {n}" for n in range(30)]
    for start in range(0, 30, 7):
        sink.write(lines[start : start + 7])

    running = job_log_lines(job=job)
    job_log_store(job_id=job.pk, attempt=1)
    stored = job_log_lines(job=job)

    assert running == stored
    assert stored[:5] == lines[:5] and stored[-5:] == lines[-5:]
    assert (
        stored[5] == "2026-11-23T09:00:25.000Z WARNING trawl.joblog 20 records dropped here "
        "(a job log keeps its first and last 10)"
    )
    assert JobLog.objects.get(job=job).dropped == 20


def test_shards_are_merged_by_time_and_attempts_kept_apart(job):
    job_log_sink(job_id=job.pk, attempt=1, shard=0).write(["2026-11-23T09:00:01.000Z INFO a one"])
    job_log_sink(job_id=job.pk, attempt=1, shard=1).write(["2026-11-23T09:00:00.500Z INFO b zero"])
    job_log_sink(job_id=job.pk, attempt=2).write(["2026-11-23T10:00:00.000Z INFO a again"])
    job_log_store(job_id=job.pk, attempt=1, shard=1)

    assert [line.split()[-1] for line in job_log_lines(job=job, attempt=1)] == ["zero", "one"]
    assert [line.split()[-1] for line in job_log_lines(job=job, attempt=2)] == ["again"]


def test_log_api_answers_text_with_tail_level_and_attempt(api, job):
    job_log_sink(job_id=job.pk, attempt=1).write(
        [
            "2026-11-23T09:00:00.000Z INFO scrapy.core.engine Spider opened",
            "2026-11-23T09:00:01.000Z WARNING shop no price",
            "2026-11-23T09:00:02.000Z ERROR shop broken",
        ]
    )
    url = f"/api/jobs/{job.pk}/log/"

    full = api.get(url)
    assert full.status_code == 200
    assert full["Content-Type"].startswith("text/plain")
    assert full.content.decode().splitlines()[0] == "2026-11-23T09:00:00.000Z INFO scrapy.core.engine Spider opened"
    assert api.get(url, {"level": "warning"}).content.decode().count("\n") == 2
    assert api.get(url, {"tail": 1}).content.decode() == "2026-11-23T09:00:02.000Z ERROR shop broken\n"
    assert api.get(url, {"attempt": 2}).content.decode() == ""
    assert api.get(url, HTTP_ACCEPT="text/plain").status_code == 200


@pytest.mark.parametrize(("param", "value"), [("tail", "x"), ("tail", "0"), ("level", "LOUD"), ("attempt", "-1")])
def test_log_api_refuses_bad_parameters_by_name(api, job, param, value):
    response = api.get(f"/api/jobs/{job.pk}/log/", {param: value})

    assert response.status_code == 400
    assert param in response.json()


def test_a_requester_cannot_read_another_requesters_log(job):
    job_log_sink(job_id=job.pk, attempt=1).write(["2026-11-23T09:00:00.000Z INFO shop secret"])

    assert client_for("mallory").get(f"/api/jobs/{job.pk}/log/").status_code == 404
    assert client_for("ops", admin=True).get(f"/api/jobs/{job.pk}/log/").status_code == 200


def test_the_log_is_stored_even_when_the_attempt_raises(job):
    with pytest.raises(RuntimeError), job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("trawl.jobs").warning("about to break")
        raise RuntimeError("infrastructure fault")

    assert JobLog.objects.get(job=job, attempt=1).text.endswith("WARNING trawl.jobs about to break")
    assert logging.getLogger("scrapy").level == logging.WARNING


@pytest.mark.django_db(transaction=True)  # the `job finish` line is logged once the end is committed
def test_the_log_is_readable_as_soon_as_the_job_has_ended(job, settings):
    """A job shorter than a flush interval: a reader who sees the final status must find the log, not ''."""
    from crawls.services.lifecycle import job_end

    settings.TRAWL_JOB_LOG_FLUSH_SECONDS = 3600  # the flusher thread never writes during this test
    with job_log_capture(job_id=job.pk, attempt=job.attempt):
        logging.getLogger("scrapy.core.engine").info("Spider opened")
        job_end(job=job)
        ended = CrawlJob.objects.get(pk=job.pk)
        lines = [line.split(" ", 2)[2] for line in job_log_lines(job=ended)]

    assert ended.status == JobStatus.SUCCEEDED
    assert lines[0] == "scrapy.core.engine Spider opened"
    assert lines[-1].startswith(f"trawl.jobs job finish id={job.pk} ")
