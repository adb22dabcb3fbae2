"""Playwright loads only in a process whose crawl renders: a pool process starts, and crawls without rendering, with
neither Playwright nor scrapy-playwright imported (~6 MiB of each pool process's memory; bench/README.md). That a
rendering crawl still renders — in a worker that started without them — is tests/e2e/test_render_e2e.py's."""

from __future__ import annotations

import os

from tests import workers
from tests.workers import last_json_line, script_run

RENDERING_PACKAGES = ("playwright", "scrapy_playwright", "pyee")

# What a pool process does as it starts (the worker's task modules, worker_process_init), then a crawl that renders
# nothing under the default TRAWL_RENDER ("request"), then a handler of a crawl that may render everything.
PLAIN_CRAWL = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
from project.celery import app
app.loader.import_default_modules()
from celery.signals import worker_process_init
worker_process_init.send(sender=None)
from tests.crawler import trawl_crawler
from runtime.rendering.dispatch import RenderOnDemandDownloadHandler
from tests.runtime.frontier_crawl import job_link_crawl

def loaded():
    return sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[2].split(","))

started = loaded()
crawl = job_link_crawl(sys.argv[1])
crawled = loaded()
handler = RenderOnDemandDownloadHandler.from_crawler(trawl_crawler(settings_dict={"TRAWL_RENDER": "always"}))
built = loaded()
renderer = handler.renderer()
print(json.dumps({
    "pages": crawl.stats.get("response_received_count"),
    "render_stats": {key: value for key, value in crawl.stats.items() if key.startswith("render/")},
    "started": started, "crawled": crawled, "built": built,
    "renderer": type(renderer).__name__, "once": handler.renderer() is renderer, "rendering": bool(loaded()),
}))
"""


def test_a_pool_process_that_renders_nothing_never_imports_playwright(db, site, redis_server):
    env = {**os.environ, "REDIS_URL": redis_server, "DATABASE_URL": workers.test_database_url()}
    done = script_run(PLAIN_CRAWL, f"{site.url}/", ",".join(RENDERING_PACKAGES), env=env)

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    assert report["pages"] > 1  # it crawled, over plain HTTP
    assert report["render_stats"] == {"render/pages": 0, "render/seconds": 0.0, "render/subrequests_blocked": 0}
    assert report["started"] == report["crawled"] == report["built"] == []
    # The first request that renders builds the rendering handler, once, and with it loads Playwright.
    assert report["renderer"] == "RenderingDownloadHandler" and report["once"] and report["rendering"]
