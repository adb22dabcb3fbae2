"""What scrapyd serves beside its JSON API and its dashboards read: its home page `/` (ScrapydWeb will not start
unless every scrapyd it is given answers it with a 200), `/jobs` (the HTML table ScrapydWeb parses for its Jobs page
and monitor), `/logs/PROJECT/SPIDER/JOB.log` (ScrapydWeb's log and stats pages, Gerapy's log tail with
`Range: bytes=-N`) and `/items/PROJECT/SPIDER/JOB.jl`, each for the requester's own jobs only (404 otherwise).

A log is the job's Trawl log rewritten in Scrapy's default format (`2026-11-29 07:00:53 [scrapy.core.engine] INFO:
Spider opened`, a multi-line record's further lines bare), which ScrapydWeb's log parser (logparser) reads for pages,
items and the stats dump. Times are UTC.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.html import escape

from crawls.logs.joblog import job_log_lines
from crawls.models import CrawlJob
from items.selectors import job_item_data
from runtime.bridge.joblog import CONTINUATION
from scrapyd import selectors
from scrapyd.views import spider_of, state_of
from scrapyd.web import endpoint

# A Trawl log line: `2026-11-29T07:00:53.199Z INFO scrapy.core.engine Spider opened`.
LINE = re.compile(r"^(?P<day>[\d-]{10})T(?P<time>[\d:]{8})\.\d+Z (?P<level>\S+) (?P<logger>\S+) (?P<text>.*)$")
SUFFIX_RANGE = re.compile(r"^bytes=-(\d+)$")
CELLS = ("project", "spider", "job", "pid", "start", "runtime", "finish", "log", "items")
PAGE = """<html><head><title>Scrapyd</title></head><body><h1>Jobs</h1>
<p>Trawl's jobs as scrapyd's jobs page shows them (<a href="listjobs.json">listjobs.json</a>).</p>
<table border="1"><thead><tr>{head}</tr></thead><tbody>
{rows}
</tbody></table></body></html>
"""


HOME = """<html><head><title>Scrapyd</title></head><body><h1>Scrapyd</h1>
<p>Trawl, answering scrapyd's JSON API. Available projects: <b>{projects}</b></p>
<ul><li><a href="jobs">Jobs</a></li><li><a href="listjobs.json">listjobs.json</a></li></ul>
</body></html>
"""


def _job(requester, project: str, spider: str, job_id: str) -> CrawlJob | None:
    job = selectors.project_job(requester=requester, job_id=job_id, project=project)
    return job if job is not None and spider_of(job) == spider else None


def _not_found(what: str) -> HttpResponse:
    return HttpResponse(f"No such {what}\n", status=404, content_type="text/plain; charset=utf-8")


@endpoint(methods=("GET", "HEAD"))
def log_file(request: HttpRequest, requester, params, *, project: str, spider: str, job: str) -> HttpResponse:
    found = _job(requester, project, spider, job)
    if found is None:
        return _not_found("log")
    body = scrapy_log_text(job_log_lines(job=found)).encode()
    tail = SUFFIX_RANGE.match(request.META.get("HTTP_RANGE", ""))
    if tail is None or not body:
        return HttpResponse(body, content_type="text/plain; charset=utf-8")
    part = body[-int(tail.group(1)) :] if int(tail.group(1)) else b""
    response = HttpResponse(part, status=206, content_type="text/plain; charset=utf-8")
    response["Content-Range"] = f"bytes {len(body) - len(part)}-{len(body) - 1}/{len(body)}"
    return response


@endpoint(methods=("GET", "HEAD"))
def items_file(request: HttpRequest, requester, params, *, project: str, spider: str, job: str) -> HttpResponse:
    """The job's items, one JSON object a line, as scrapyd's feed writes them."""
    found = _job(requester, project, spider, job)
    if found is None:
        return _not_found("items")
    lines = (json.dumps(data, default=str) + "\n" for data in job_item_data(job_id=found.pk))
    return StreamingHttpResponse(lines, content_type="application/x-ndjson")


@endpoint(methods=("GET", "HEAD"))
def home_page(request: HttpRequest, requester, params) -> HttpResponse:
    """scrapyd's home page: the projects, and links relative to it (at :6800/ and at /scrapyd/ alike)."""
    projects = ", ".join(escape(name) for name in selectors.projects())
    return HttpResponse(HOME.format(projects=projects), content_type="text/html; charset=utf-8")


@endpoint(methods=("GET",))
def jobs_page(request: HttpRequest, requester, params) -> HttpResponse:
    """Pending, then running, then finished jobs, in the columns of scrapyd's jobs page."""
    jobs = selectors.project_jobs_listed(requester=requester)
    order = {"pending": 0, "running": 1, "finished": 2}
    rows = [_row(job) for job in sorted(jobs, key=lambda job: order[state_of(job)])]
    head = "".join(f"<th>{name.title()}</th>" for name in CELLS)
    return HttpResponse(PAGE.format(head=head, rows="\n".join(rows)), content_type="text/html; charset=utf-8")


def _row(job: CrawlJob) -> str:
    """One job's row; links relative to the page, so they hold at a root (:6800/jobs) and under /scrapyd/."""
    started, finished = job.started_at, job.finished_at if state_of(job) == "finished" else None
    path = f"{escape(job.scraper.name)}/{escape(spider_of(job))}/{job.pk}"
    cells = {
        "project": escape(job.scraper.name),
        "spider": escape(spider_of(job)),
        "job": str(job.pk),
        "start": _second(started),
        "runtime": str((finished or datetime.now(started.tzinfo)) - started).split(".")[0] if started else "",
        "finish": _second(finished),
        "log": f"<a href='logs/{path}.log'>Log</a>" if started else "",
        "items": f"<a href='items/{path}.jl'>Items</a>" if started else "",
    }
    return "<tr>" + "".join(f"<td>{cells.get(name, '')}</td>" for name in CELLS) + "</tr>"


def _second(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def scrapy_log_text(records: list[str]) -> str:
    """Trawl's log records (runtime.bridge.joblog) in Scrapy's default LOG_FORMAT and LOG_DATEFORMAT."""
    out = []
    for record in records:
        for index, line in enumerate(record.split("\n")):
            parts = LINE.match(line)
            if parts is None:
                out.append(line)
            elif index and parts["text"].startswith(CONTINUATION):
                out.append(parts["text"][len(CONTINUATION) :])
            else:
                out.append(f"{parts['day']} {parts['time']} [{parts['logger']}] {parts['level']}: {parts['text']}")
    return "".join(f"{line}\n" for line in out)
