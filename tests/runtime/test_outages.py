"""A frontier crawl whose database goes away while the throttle needs it (its rules are loaded from the database
whenever Redis has none: a fresh installation here, Redis restarted empty in production).

The mixed chaos soak ended a wide crawl `succeeded` 10-117 pages short of its site: PostgreSQL was restarting while the
throttle reloaded its rules, the OperationalError failed those downloads like a site's error, and the frontier
counted the requests done, never fetched. Now the throttle waits the database out like Redis, and a request that
fails because of Trawl's own infrastructure stays in the job's frontier while the crawl stops to be requeued.

The database is a real SQLite file whose folder is renamed away (every connection then fails with "unable to open
database file", an OperationalError as PostgreSQL's restart is) and back. Each crawl runs in a process of its own:
the reactor is process-wide.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.sites import LocalSite, write_catalogue
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.timeout(240)

SCHEMA = """
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from django.core.management import call_command
call_command("migrate", "throttling", verbosity=0)
"""

CRAWL = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.frontier import codec
from crawls.services.shards import job_frontier
from runtime.bridge.runner import live_stats, run_spider
from runtime.settings.compose import with_trawl_components
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

url, folder, comes_back = sys.argv[1], sys.argv[2], sys.argv[3] == "comes-back"
os.rename(folder, folder + "-away")  # the database is away from the crawl's start
job = uuid.uuid4().hex
frontier = job_frontier(job)
store = storing_tick(frontier)


def tick(session):
    # The database comes back once the throttle has met it away (and is waiting for it).
    if comes_back and os.path.exists(folder + "-away") and live_stats(session).get("throttle/database_errors"):
        os.rename(folder + "-away", folder)
    return store(session)


crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=with_trawl_components(frontier_crawl_settings(job)),  # Trawl's middlewares: the throttle, ...
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 3}, "config": {}},
    timeout=90,
    on_tick=tick,
    tick_seconds=0.5,
)
held = sorted(codec.decode_dict(payload)["url"] for payload in frontier.inflight_payloads())
stats = crawl.stats
print(json.dumps({
    "reason": crawl.finish_reason,
    "infrastructure_errors": stats.get("trawl/infrastructure_errors", 0),
    "database_waits": stats.get("throttle/database_errors", 0),
    "download_errors": stats.get("downloader/exception_count", 0),
    "held": held,
    "queued": frontier.pending(),
}))
frontier.delete()
"""


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    """A database holding the throttle's tables (what the crawl reads), made once: migrations take a while."""
    folder = tmp_path_factory.mktemp("schema")
    done = script_run(SCHEMA, env=_env(folder / "trawl.sqlite3"), timeout=180)
    assert done.returncode == 0, done.stderr
    return (folder / "trawl.sqlite3").read_bytes()


@pytest.fixture
def shop(tmp_path):
    write_catalogue(tmp_path / "shop", products=6, per_page=3)
    with LocalSite(tmp_path / "shop") as site:
        yield site


def _env(database, **extra: str) -> dict:
    # A fresh installation namespace: Redis holds no throttle rules for it, so the first request loads them.
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "TRAWL_INSTALLATION_ID": f"outage-{uuid.uuid4().hex[:8]}",
        **extra,
    }


def crawl_while_the_database_is_away(tmp_path, schema: bytes, shop: LocalSite, *, comes_back: bool, patience: int):
    folder = tmp_path / "database"
    folder.mkdir()
    (folder / "trawl.sqlite3").write_bytes(schema)
    env = _env(folder / "trawl.sqlite3", TRAWL_INFRA_PATIENCE_SECONDS=str(patience))
    back = "comes-back" if comes_back else "stays-away"
    done = script_run(CRAWL, f"{shop.url}/index.html", str(folder), back, env=env, timeout=150)
    assert done.returncode == 0, done.stderr[-4000:]
    return last_json_line(done), done.stderr


def pages_of(site: LocalSite) -> set[str]:
    return {f"/{path.name}" for path in site.root.glob("*.html")}


def test_a_database_restart_while_the_throttle_loads_its_rules_is_waited_out_and_every_page_fetched(
    tmp_path, schema, shop
):
    result, log = crawl_while_the_database_is_away(tmp_path, schema, shop, comes_back=True, patience=60)

    assert pages_of(shop) <= set(shop.hits), f"never fetched: {sorted(pages_of(shop) - set(shop.hits))}\n{result}"
    assert result["reason"] == "finished", log[-3000:]
    assert result["database_waits"] >= 1, result  # the throttle met the outage and waited
    assert result["download_errors"] == 0 and result["infrastructure_errors"] == 0, result
    assert result["held"] == [] and result["queued"] == 0


def test_a_request_failed_by_an_outage_past_patience_stays_in_the_frontier_and_the_crawl_stops(tmp_path, schema, shop):
    result, log = crawl_while_the_database_is_away(tmp_path, schema, shop, comes_back=False, patience=2)

    # Never `finished` with the start page unfetched: stopped as Trawl's own failure (the job would be requeued)...
    assert result["reason"] == "trawl_infrastructure", log[-3000:]
    assert result["infrastructure_errors"] >= 1
    assert not shop.hits
    # ...with the start page still in flight in the frontier, for the next attempt to fetch.
    assert result["held"] == [f"{shop.url}/index.html"], result
