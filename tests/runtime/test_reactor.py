"""A crawling process collects garbage rarely, but still collects it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import workers  # not its test_database_url by name: pytest would collect it as a test
from tests.workers import BASE_DIR, last_json_line, script_run

CYCLES = """
import gc, weakref
from runtime.bridge.reactor import tune_gc

tune_gc()
freed, passes = [], []
gc.callbacks.append(lambda phase, info: passes.append(1) if phase == "start" else None)

class Node:
    pass

for number in range(100_000):
    node = Node()
    node.self = node  # a reference cycle: only the collector frees it
    weakref.finalize(node, freed.append, number)
    del node
print(gc.get_freeze_count() > 0, len(freed), len(passes))
"""


def test_tuned_collection_still_frees_reference_cycles_as_a_crawl_makes_them():
    done = subprocess.run([sys.executable, "-c", CYCLES], cwd=BASE_DIR, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    frozen, freed, passes = done.stdout.split()
    assert frozen == "True"  # what the process held at start-up is out of the collector's way
    # Rarely: at CPython's defaults (a pass every 700 net allocations) this loop runs ~710 passes, tuned ~50.
    assert int(passes) <= 100
    # Without an explicit gc.collect(): at most a young generation's worth of cycles waits for the next pass.
    assert int(freed) >= 100_000 - 2 * 10_000


FIRST_CRAWL = """
import json, os, sys, uuid
UNUSED = sys.argv[2:]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.bridge.reactor import ensure_reactor
ensure_reactor()  # what a pool process does as it starts (worker_process_init)
from runtime.frontier import Frontier
from crawls.models import CrawlJob
from runtime.bridge.runner import run_spider
from runtime.settings.compose import scrapy_settings_for
from crawls.services.crawl_spec import crawl_spec_build
from runtime.spiders.link import LinkSpider
from crawls.services.shards import frontier_settings
from registry.models import Scraper, ScraperVersion
from tests.runtime.frontier_crawl import job_link_crawl  # imports nothing more than the lines above

before = set(sys.modules)
crawl = job_link_crawl(sys.argv[1])
unused = [name for name in UNUSED if name in sys.modules]
report = {"pages": crawl.stats.get("response_received_count"), "imported": sorted(set(sys.modules) - before)}
print(json.dumps({**report, "unused": unused}))
"""
CRAWL_PACKAGES = ("scrapy", "twisted", "crawls", "throttling", "items", "parsel", "w3lib", "protego", "lxml")
# Modules of extensions no crawl may turn on (telnet, remote control): a crawling process never loads them.
UNUSED_MODULES = ("scrapy.extensions.telnet", "scrapy.extensions.remote_control", "aiohttp", "twisted.conch")


def test_a_pool_process_s_first_crawl_imports_no_crawl_component(db, site, redis_server):
    """Scrapy imports its components when a crawl first builds them: a fresh pool process paid ~7 % of its first
    job's crawl time for that (bench/README.md). The process imports them as it starts instead."""
    env = {**os.environ, "REDIS_URL": redis_server, "DATABASE_URL": workers.test_database_url()}
    done = script_run(FIRST_CRAWL, f"{site.url}/", *UNUSED_MODULES, env=env)

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    assert report["pages"] > 1  # it crawled
    assert [name for name in report["imported"] if name.split(".")[0] in CRAWL_PACKAGES] == []
    assert report["unused"] == [], "the crawl loaded extensions that are always off"
