"""runtime/guard/handlers.py in a real crawl (its own process, Scrapy on the asyncio reactor through crochet): an
https site whose name rebinds from an allowed address to a private one. Every request, robots.txt included, reaches
the allowed twin with the name as SNI; the private twin on the same port sees nothing."""

from __future__ import annotations

import json
import os

from runtime.guard.schemes import HTTP_DOWNLOAD_HANDLERS
from runtime.settings.enforced import GUARD, GUARD_ORDER
from tests.security.nameserver import NameServer, self_signed, twin_listeners
from tests.workers import last_json_line, script_run

SCRIPT = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider

url, settings = sys.argv[1], json.loads(sys.argv[2])
crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=settings,
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 3}, "config": {}},
    timeout=60,
    on_tick=lambda session: session.drain(100) and "",
    tick_seconds=0.5,
)
print(json.dumps({key: value for key, value in crawl.stats.items() if isinstance(value, (int, str))}), flush=True)
"""

PAGES = {
    "/": '<html><title>home</title><a href="/next">next</a></html>',
    "/next": '<html><title>next</title><a href="/last">last</a></html>',
    "/last": "<html><title>last</title></html>",
}


def test_a_guarded_https_crawl_connects_only_to_the_addresses_it_checked(tmp_path):
    tls = self_signed(tmp_path, "tls.test")
    private, allowed = twin_listeners(PAGES, tls=tls)
    with NameServer() as names, private, allowed:
        names.rebinding("tls.test", first="127.0.0.2", then="127.0.0.1")
        settings = {
            "LOG_LEVEL": "ERROR",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": True,
            "DOWNLOAD_HANDLERS": HTTP_DOWNLOAD_HANDLERS,
            "DOWNLOADER_MIDDLEWARES": {GUARD: GUARD_ORDER},
            "TRAWL_GUARD_PRIVATE_TARGETS": True,
            "TRAWL_PRIVATE_TARGETS_ALLOWED": ["127.0.0.2/32"],
            "TRAWL_DNS_SERVERS": [names.address],
        }
        url = f"https://tls.test:{allowed.port}/"
        done = script_run(SCRIPT, url, json.dumps(settings), env={**os.environ}, timeout=120)

    assert done.returncode == 0, done.stderr[-3000:]
    stats = last_json_line(done)
    print(f"\nqueries={names.queries['tls.test']} allowed saw {allowed.paths()} private saw {private.paths()}")
    assert sorted(allowed.paths()) == ["/", "/last", "/next", "/robots.txt"]
    assert set(allowed.server_names) == {"tls.test"}
    assert private.hits == [] and private.server_names == []
    assert stats.get("guard/refused", 0) == 0 and stats["response_received_count"] == 4
