"""What ScrapydWeb (my8100/scrapydweb 1.5) and Gerapy (Gerapy/Gerapy 0.9) call on a scrapyd, answered in the shape
each parses (their source read, not installed: docs/scrapyd.md lists what was checked). The patterns below are
theirs, copied from where they parse scrapyd's answers."""

from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from crawls.models import CrawlJob, JobLog, JobStatus
from tests.scrapyd.test_api import (  # noqa: F401 - fixtures
    admin,
    alice,
    built,
    client,
    deploy,
    egg,
    no_build_worker,
    package_dirs,
)

pytestmark = pytest.mark.django_db
# scrapydweb/views/dashboard/jobs.py: its Jobs page and monitor read scrapyd's /jobs HTML with these.
JOB_PATTERN = re.compile(
    r"""
                            <tr>\s*
                                <td>(?P<Project>.*?)</td>\s*
                                <td>(?P<Spider>.*?)</td>\s*
                                <td>(?P<Job>.*?)</td>\s*
                                (?:<td>(?P<PID>.*?)</td>\s*)?
                                (?:<td>(?P<Start>.*?)</td>\s*)?
                                (?:<td>(?P<Runtime>.*?)</td>\s*)?
                                (?:<td>(?P<Finish>.*?)</td>\s*)?
                                (?:<td>(?P<Log>.*?)</td>\s*)?
                                (?:<td>(?P<Items>.*?)</td>\s*)?
                                [\w\W]*?
                            </tr>
                          """,
    re.X,
)
JOB_KEYS = ["project", "spider", "job", "pid", "start", "runtime", "finish", "href_log", "href_items"]
HREF_PATTERN = re.compile(r"""href=['"](.+?)['"]""")
# logparser (ScrapydWeb's log and stats pages): a line's time, and the stats dump at the end of a crawl's log.
DATETIME_PATTERN = r"\d{4}-\d{2}-\d{2}[ ]\d{2}:\d{2}:\d{2}"
PATTERN_LOG_ENDING = re.compile(
    rf"""({DATETIME_PATTERN})[ ][^\n]+?(Dumping[ ]Scrapy[ ]stats:.*?(\{{.+?\}}).*|INFO:[ ]Spider[ ]closed.*)""",
    re.X | re.S,
)
TRAWL_LOG = (
    "2026-11-29T07:00:44.700Z INFO scrapy.core.engine Spider opened\n"
    "2026-11-29T07:00:53.199Z INFO scrapy.statscollectors Dumping Scrapy stats:\n"
    "2026-11-29T07:00:53.199Z INFO scrapy.statscollectors | {'item_scraped_count': 4,\n"
    "2026-11-29T07:00:53.199Z INFO scrapy.statscollectors |  'response_received_count': 5}\n"
    "2026-11-29T07:00:53.200Z INFO scrapy.core.engine Spider closed (shutdown)"
)


def jobs_of_three(admin, alice):  # noqa: F811
    """Pending, running and finished jobs of alice's, as scheduled through schedule.json."""
    deploy(admin)
    built()
    ids = [alice.post("/scrapyd/schedule.json", {"project": "myproject", "spider": "books"}).json()["jobid"]
           for _ in range(3)]  # fmt: skip
    now = timezone.now()
    CrawlJob.objects.filter(pk=ids[1]).update(status=JobStatus.RUNNING, started_at=now)
    CrawlJob.objects.filter(pk=ids[2]).update(status=JobStatus.SUCCEEDED, started_at=now, finished_at=now)
    return ids


def test_scrapydwebs_jobs_page_reads_trawls_jobs_with_its_own_pattern(admin, alice):  # noqa: F811
    ids = jobs_of_three(admin, alice)
    page = alice.get("/scrapyd/jobs")
    assert page.status_code == 200 and "<h1>Jobs</h1>" in page.content.decode()
    text = re.sub(r"<thead>.*?</thead>", "", page.content.decode(), flags=re.S)
    jobs = [dict(zip(JOB_KEYS, job, strict=True)) for job in re.findall(JOB_PATTERN, text)]

    assert [job["job"] for job in jobs] == ids and {job["project"] for job in jobs} == {"myproject"}
    pending, running, finished = jobs
    assert (pending["start"], pending["finish"], running["finish"]) == ("", "", "")  # how it tells the states apart
    for moment in (running["start"], finished["start"], finished["finish"]):
        datetime.strptime(moment, "%Y-%m-%d %H:%M:%S")  # its database mode parses them so
    assert HREF_PATTERN.search(finished["href_log"]).group(1) == f"logs/myproject/books/{ids[2]}.log"
    assert HREF_PATTERN.search(finished["href_items"]).group(1) == f"items/myproject/books/{ids[2]}.jl"
    assert re.findall(JOB_PATTERN, client("bob").get("/scrapyd/jobs").content.decode()) == []


def test_scrapydwebs_schedule_sends_its_own_jobid_and_settings(admin, alice):  # noqa: F811
    deploy(admin)
    built()
    answer = alice.post(
        "/scrapyd/schedule.json",
        {"project": "myproject", "spider": "books", "jobid": "2026-11-29T07_00_00",
         "setting": ["USER_AGENT=Mozilla/5.0"]},
    ).json()  # ScrapydWeb's operations/schedule.py and api.py always send a timestamp jobid  # fmt: skip
    assert answer["status"] == "ok", answer
    job = CrawlJob.objects.get(pk=answer["jobid"])  # Trawl's id answers, as its listjobs then shows
    assert job.args == {} and job.options == {"useragent": "Mozilla/5.0"}


def test_scrapydweb_posts_the_egg_as_a_form_field_and_gerapy_as_a_file_named_egg(admin):  # noqa: F811
    body = urlencode({"project": "myproject", "version": "1700000000", "egg": egg().getvalue()})
    form = admin.post("/scrapyd/addversion.json", body, content_type="application/x-www-form-urlencoded").json()
    assert form["status"] == "ok" and form["spiders"] == 2, form  # ScrapydWeb's DeployXhrView
    named_egg = egg()
    named_egg.name = "egg"  # python-scrapyd-api's add_version(project, version, egg_bytes): requests names it so
    gerapy = admin.post("/scrapyd/addversion.json", {"project": "myproject", "version": "1700000100", "egg": named_egg})
    assert gerapy.json()["status"] == "ok", gerapy.json()
    assert admin.get("/scrapyd/listversions.json", {"project": "myproject"}).json()["versions"][-1] == "1700000100"
    # Gerapy reads the latest label as a deploy time: int(versions[-1]).
    assert int(admin.get("/scrapyd/listversions.json", {"project": "myproject"}).json()["versions"][-1])
    text_field = admin.post("/scrapyd/addversion.json", {"project": "myproject", "version": "1700000200", "egg": "x"})
    assert text_field.json()["message"] == "'egg' file is required"  # a multipart text field is no egg


def test_a_jobs_log_is_served_where_scrapydweb_and_gerapy_fetch_it_in_scrapys_format(admin, alice):  # noqa: F811
    ids = jobs_of_three(admin, alice)
    job = CrawlJob.objects.get(pk=ids[2])
    JobLog.objects.create(job=job, attempt=job.attempt, text=TRAWL_LOG)
    path = f"/scrapyd/logs/myproject/books/{job.pk}"

    log = alice.get(f"{path}.log")
    assert log.status_code == 200 and log["Content-Type"].startswith("text/plain")
    text = log.content.decode()
    assert text.splitlines()[0] == "2026-11-29 07:00:44 [scrapy.core.engine] INFO: Spider opened"
    ending = PATTERN_LOG_ENDING.search(text)  # where logparser finds the pages and items of a finished crawl
    assert ending and "'item_scraped_count': 4" in ending.group(3) and "'response_received_count': 5" in ending.group(3)
    assert alice.get(f"{path}.txt").content == log.content  # ScrapydWeb tries .log, .log.gz, .txt in turn
    assert alice.get(f"{path}.log.gz").status_code == 404

    tail = alice.get(f"{path}.log", HTTP_RANGE="bytes=-30")  # Gerapy's job_log asks for the last bytes only
    assert tail.status_code == 206 and tail.content == log.content[-30:]
    assert tail["Content-Range"] == f"bytes {len(log.content) - 30}-{len(log.content) - 1}/{len(log.content)}"

    assert client("bob").get(f"{path}.log").status_code == 404  # Gerapy shows 'Log Not Found'
    assert alice.get(f"/scrapyd/logs/myproject/other/{job.pk}.log").status_code == 404
    assert alice.get(f"/scrapyd/logs/other/books/{job.pk}.log").status_code == 404
    assert Client().get(f"{path}.log").status_code == 401


def test_a_jobs_items_are_served_as_scrapyds_feed(admin, alice):  # noqa: F811
    from access.tenancy import job_tenant_id
    from items.services import items_upsert

    ids = jobs_of_three(admin, alice)
    job = CrawlJob.objects.get(pk=ids[2])
    items_upsert(job_id=job.pk, scraper_id=job.scraper_id, tenant_id=job_tenant_id(requester_id=job.requester_id),
                 items=[{"url": "http://shop.test/1", "title": "One"}])  # fmt: skip
    feed = alice.get(f"/scrapyd/items/myproject/books/{job.pk}.jl")
    assert feed.status_code == 200
    assert b"".join(feed.streaming_content).decode() == '{"url": "http://shop.test/1", "title": "One"}\n'
    assert client("bob").get(f"/scrapyd/items/myproject/books/{job.pk}.jl").status_code == 404


def test_listjobs_and_daemonstatus_carry_what_the_dashboards_show(admin, alice):  # noqa: F811
    ids = jobs_of_three(admin, alice)
    status = alice.get("/scrapyd/daemonstatus.json").json()
    assert status["node_name"] and status["status"] == "ok"  # ScrapydWeb's servers page and projects.py
    jobs = alice.get("/scrapyd/listjobs.json", {"project": "myproject"}).json()
    finished = jobs["finished"][0]
    assert finished["id"] == ids[2] and "pid" in finished
    # Gerapy's Schedule.vue shows start_time / end_time cut to 16 characters: minutes.
    for moment in (finished["start_time"], finished["end_time"], jobs["running"][0]["start_time"]):
        datetime.strptime(moment[:16], "%Y-%m-%d %H:%M")


def test_the_jobs_page_escapes_what_uploaded_code_named(admin, alice):  # noqa: F811
    """A spider's name comes from an uploaded project: on ScrapydWeb's page it must stay text, never markup."""
    ids = jobs_of_three(admin, alice)
    CrawlJob.objects.filter(pk=ids[2]).update(spider="<img src=x onerror=alert(1)>")
    page = alice.get("/scrapyd/jobs").content.decode()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
