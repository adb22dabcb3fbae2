"""How often a crawl's frontier writes to Redis: what a page yields (its links and items) goes with the page's own
end, in one commit, not one commit each. The crawl runs in a subprocess of its own: the reactor is process-wide."""

from __future__ import annotations

import os
from typing import Any

from tests.workers import last_json_line, script_run

COUNTED_CRAWL = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.services.shards import job_frontier
from runtime.frontier import scheduler
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

commits = []
patient = scheduler.commit_patiently

async def counted(frontier, client, *, requests, items, done, take, **options):
    commits.append({"requests": len(requests), "items": len(items), "done": len(done), "take": take})
    return await patient(frontier, client, requests=requests, items=items, done=done, take=take, **options)

scheduler.commit_patiently = counted
url, job = sys.argv[1], uuid.uuid4().hex
frontier, stored = job_frontier(job), []
settings = {**frontier_crawl_settings(job), "CONCURRENT_REQUESTS": int(sys.argv[2])}
crawl, session = run_spider(
    spider_cls=LinkSpider,
    settings=settings,
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 50}, "config": {}},
    timeout=120,
    on_tick=storing_tick(frontier, into=stored),
    tick_seconds=0.2,
)
stored.extend(session.drain(10_000))
print(json.dumps({
    "reason": crawl.finish_reason,
    "responses": crawl.stats.get("downloader/response_count", 0),
    "stored": len(stored),
    "commits": commits,
}))
frontier.delete()
"""


def counted_crawl(url: str, redis_url: str, concurrency: int) -> dict[str, Any]:
    env = {**os.environ, "REDIS_URL": redis_url, "TRAWL_INSTALLATION_ID": "commits-test"}
    done = script_run(COUNTED_CRAWL, url, str(concurrency), env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    return last_json_line(done)


def test_a_page_s_links_items_and_end_go_to_redis_in_one_commit(site, redis_server):
    result = counted_crawl(f"{site.url}/index.html", redis_server, concurrency=1)

    assert result["reason"] == "finished"
    pages, commits = result["responses"], result["commits"]
    assert pages == result["stored"] == 16
    # The start request's commit, then about one a page: its end, with the links and the item it yielded (a page's
    # output in a commit of its own made it two a page; a moment's stall of a loaded machine may split one page).
    assert len(commits) < 1.5 * pages, commits
    assert sum(commit["done"] for commit in commits) == sum(commit["items"] for commit in commits) == pages
