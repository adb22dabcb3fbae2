"""scrapyd's JSON API at the root of its own port (`make run`: 127.0.0.1:6800), for tools that expect a scrapyd root
URL (`http://localhost:6800/schedule.json`): every path is served as the same path under /scrapyd/ of the web app,
except a job's log and items in Trawl's API, which listjobs.json links to (`log_url`, `items_url`) on the port it was
asked on. A process of its own, so a port 6800 already taken (a scrapyd still running) leaves the main web server
alone."""

from __future__ import annotations

import re

from project.wsgi import application as trawl

PREFIX = "/scrapyd"
JOB_LINKS = re.compile(r"^/api/jobs/[0-9a-f-]{36}/(?:log|items)/$")


def application(environ, start_response):
    path = environ.get("PATH_INFO", "") or "/"
    if not path.startswith(f"{PREFIX}/") and not JOB_LINKS.match(path):
        environ["PATH_INFO"] = PREFIX + path
    return trawl(environ, start_response)
