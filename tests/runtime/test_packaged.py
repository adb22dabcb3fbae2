"""A packaged version's crawl, run in its child process by the task thread's loop (runtime.packaged.run)."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import time
import uuid

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from crawls.services.crawl_spec import package_spec_of
from crawls.services.shards import job_frontier
from project.redis import get_redis
from runtime.bridge.runner import CrawlSession
from runtime.packaged.child_db import CallScope, db_call_answer
from runtime.packaged.child_env import child_environment
from runtime.packaged.child_redis import (
    ChildRedis,
    _user_prefix,
    child_redis_grant,
    child_redis_keys,
    child_redis_revoke,
    child_redis_sweep,
)
from runtime.packaged.children import child_discard, child_for, child_return
from runtime.packaged.run import _relog, _screenshot_keep, run_packaged
from runtime.rendering.screenshots import (
    SCREENSHOT_MAX_BYTES,
    Screenshot,
    screenshot_fields,
    screenshot_received,
)
from runtime.settings.compose import child_pool, child_settings, with_trawl_components
from tests.crawler import composed
from tests.registry.test_package_envs import package_dirs, packaged  # noqa: F401 (fixture)
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick
from throttling.buckets import Limits
from throttling.models import DomainThrottle, Proxy
from throttling.services import throttle_buckets

pytestmark = pytest.mark.django_db


def test_a_packaged_frontier_crawl_waiting_for_its_items_to_be_stored_wakes_the_task_thread(
    tmp_path, site, redis_server
):
    """The child's idle crawl asks the worker to store its written-ahead items now, and is woken once they are:
    before, a one-page packaged job lasted until the task thread's next tick (30 s here, 0.5 s by default)."""
    version = packaged(tmp_path, dep="1.0")
    job = uuid.uuid4().hex
    frontier = job_frontier(job)

    child = child_for(package_spec_of(version.package), pool=child_pool())  # started (and its environment built) first
    child_return(child)  # warm: the crawl takes it
    try:
        started = time.monotonic()
        crawl, _ = run_packaged(
            package=package_spec_of(version.package),
            spider="trawlshop.spiders.ShopSpider",
            pool=child_pool(),
            settings=frontier_crawl_settings(job),
            spider_kwargs={"url": f"{site.url}/product-1.html"},
            timeout=120,
            on_tick=storing_tick(frontier),
            tick_seconds=30,
        )
        seconds = time.monotonic() - started
    finally:
        child_discard(child)
        frontier.delete()

    assert (crawl.finish_reason, crawl.stats.get("item_scraped_count")) == ("finished", 1), crawl
    assert seconds < 15, f"the crawl ended {seconds:.1f} s after it started: it waited for the 30 s tick"


def crawl_product_page(version, site, settings: dict, *, spider: str = "trawlshop.spiders.ShopSpider"):
    """The packaged shop spider's crawl of one product page with these settings (plus Trawl's components), in a child
    discarded afterwards."""
    child = child_for(package_spec_of(version.package), pool=child_pool())
    child_return(child)  # warm: the crawl takes it
    try:
        return run_packaged(
            package=package_spec_of(version.package),
            spider=spider,
            pool=child_pool(),
            settings=with_trawl_components(composed(settings)),
            spider_kwargs={"url": f"{site.url}/product-1.html", "config": {}},
            timeout=120,
            on_tick=lambda session: "",
        )
    finally:
        child_discard(child)


def test_the_child_gets_its_proxies_through_its_parent(tmp_path, site, redis_server):
    """Proxy rotation reads the proxy table: the child has no database, so the worker reads it for the child."""
    version = packaged(tmp_path, dep="1.0")
    Proxy.objects.create(url=site.url, egress_label="proxy-1")  # the test site answers proxied requests too
    crawl, _ = crawl_product_page(version, site, {"LOG_LEVEL": "ERROR", "ROBOTSTXT_OBEY": False})

    assert crawl.finish_reason == "finished", crawl
    assert crawl.stats.get("proxy/requests") == 1, crawl.stats
    # Its Redis user reaches the throttle's keys: buckets taken, no Redis error.
    assert crawl.stats.get("throttle/requests") == 1 and "throttle/redis_errors" not in crawl.stats, crawl.stats
    assert site.hits[f"{site.url}/product-1.html"] == 1, "the request went through the proxy the parent read"


def test_a_packaged_rendering_crawl_hands_its_screenshots_to_the_worker(tmp_path, site, redis_server):
    """The child renders with its own Chromium; what it took reaches the worker's session (stored with the job by
    crawls/services/execution.py, as an in-process crawl's)."""
    version = packaged(tmp_path, dep="1.0")
    asked = {"LOG_LEVEL": "ERROR", "ROBOTSTXT_OBEY": False, "TRAWL_RENDER": "always", "TRAWL_RENDER_SCREENSHOTS": 1}
    crawl, session = crawl_product_page(version, site, asked)

    assert crawl.finish_reason == "finished", crawl
    assert crawl.stats.get("render/screenshots") == 1, crawl.stats
    [shot] = session.screenshots
    assert (shot.url, shot.reason) == (f"{site.url}/product-1.html", "asked")
    assert shot.image.startswith(b"\xff\xd8\xff") and len(shot.image) > 1000


def test_a_childs_screenshot_is_kept_only_if_it_is_one_and_only_as_many_as_a_job_keeps(settings):
    """The child runs uploaded code: whatever it calls a screenshot is checked on receipt."""
    jpeg = b"\xff\xd8\xff\xe0" + b"\0" * 2000
    sent = screenshot_fields(Screenshot(url="https://shop.test/a", reason="asked", image=jpeg, taken_at=time.time()))
    assert screenshot_received(json.loads(json.dumps(sent))).image == jpeg
    forged = [
        {**sent, "image": base64.b64encode(b"<svg onload=alert(1)>").decode()},  # not a JPEG
        {**sent, "image": base64.b64encode(jpeg + b"\0" * SCREENSHOT_MAX_BYTES).decode()},  # too big
        {**sent, "image": "not base64!"},
        {**sent, "image": ["a list"]},
        {**sent, "reason": "anything"},
        {**sent, "url": {"a": "dict"}},
    ]
    assert [screenshot_received(fields) for fields in forged] == [None] * len(forged)
    assert screenshot_received({**sent, "taken_at": 10**12}).taken_at <= time.time()  # a time in the future: now

    session = CrawlSession()
    for fields in [*forged, *[sent] * 5]:
        _screenshot_keep(session, fields, most=3)
    assert len(session.screenshots) == 3


def test_a_child_is_answered_only_about_its_own_crawl(db, django_assert_num_queries):
    """The child is hostile: another group's proxies (and their credentials), resting a proxy it was not given,
    anything else — refused."""
    Proxy.objects.create(url="http://user:secret@10.0.0.5:3128", egress_label="a", group="other")
    Proxy.objects.create(url="http://10.0.0.6:3128", egress_label="b")
    scope = CallScope.of_crawl(settings=composed(), spider_kwargs={"config": {}})

    def ask(what, **args):
        return db_call_answer({"t": "call", "id": 7, "what": what, "args": args}, scope)

    assert ask("proxies", group="") == {"cmd": "answer", "id": 7, "value": [["http://10.0.0.6:3128", "b", 0.0]]}
    with django_assert_num_queries(0):  # asked again at once: the same answer, not another query
        assert ask("proxies", group="")["value"] == [["http://10.0.0.6:3128", "b", 0.0]]
    assert "not this crawl's" in ask("proxies", group="other")["error"]
    assert "not a proxy of this crawl" in ask("proxy_cool_down", url="http://user:secret@10.0.0.5:3128")["error"]
    rest = ask("proxy_cool_down", url="http://10.0.0.6:3128", seconds=10**9)
    assert rest == {"cmd": "answer", "id": 7, "value": None}
    rested = Proxy.objects.get(egress_label="b").cooling_down_until - timezone.now()
    assert rested.total_seconds() <= scope.cooldown, "the child cannot rest a proxy longer than its crawl's cooldown"
    assert "unknown call" in ask("sql", query="SELECT 1")["error"]
    assert ask("proxy_cool_down", url=["unhashable"])["error"]


@pytest.mark.usefixtures("throttle_keys_clean")
def test_the_childs_rule_checks_are_made_by_its_worker(db):
    """The child's Redis user may not write the rule mirror (nor has it a database): its periodic check that the
    rules did not change behind the services' back is made by its worker, at most once a second for one crawl."""
    DomainThrottle.objects.create(domain="changed.test", rate=3)  # behind the services: the mirror does not know
    scope = CallScope.of_crawl(settings=composed(), spider_kwargs={"config": {}})
    buckets = throttle_buckets()

    answer = db_call_answer({"t": "call", "id": 3, "what": "throttle_rules_check", "args": {}}, scope)

    assert answer == {"cmd": "answer", "id": 3, "value": True}
    assert Limits.from_redis(get_redis().get(buckets.rule_key("changed.test"))).rate == 3
    again = db_call_answer({"t": "call", "id": 4, "what": "throttle_rules_check", "args": {}}, scope)
    assert again == {"cmd": "answer", "id": 4, "value": False}


def test_the_child_environment_and_settings_are_allow_listed(monkeypatch, settings):
    for name in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "AWS_SECRET_ACCESS_KEY", "TRAWL_ADMIN_PASSWORD"):
        monkeypatch.setenv(name, f"secret-{name}")
    settings.TRAWL_STATS_METRICS_TOKEN = "secret-metrics"
    settings.TRAWL_INSTALLATION_ID = "abcd1234"

    environment = child_environment(
        channel_fd=9,
        redis_url="redis://child:pw@127.0.0.1:6379/0",
        idle_seconds=60,
        child_settings=child_settings(),
    )
    given = json.loads(environment["TRAWL_CHILD_SETTINGS"])

    assert not [value for value in environment.values() if "secret-" in value]
    assert environment["DJANGO_SETTINGS_MODULE"] == "project.settings_child"
    assert "SECRET_KEY" not in given and "DATABASES" not in given and "TRAWL_STATS_METRICS_TOKEN" not in given
    assert given["REDIS_URL"] == "redis://child:pw@127.0.0.1:6379/0" and given["TRAWL_INSTALLATION_ID"] == "abcd1234"
    assert "django.contrib.admin" not in given["INSTALLED_APPS"]


def test_a_worker_process_becomes_undumpable():
    """Non-dumpable, its /proc/<pid>/environ is not readable by a process of its user without CAP_SYS_PTRACE."""
    code = "import ctypes; from runtime.packaged.child_env import undumpable; undumpable(); "
    code += "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"  # PR_GET_DUMPABLE
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_a_child_log_record_is_rebuilt_from_plain_fields(caplog):
    """The child is not trusted to build the worker's log records: no exc_info, args or stack of its making."""
    hostile = {"name": "dumpspider", "levelno": 30, "msg": "hello %s", "args": ["x"], "exc_info": [1, 2, 3]}
    with caplog.at_level(logging.INFO, logger="trawl.package"):
        _relog({**hostile, "stack_info": "forged", "created": "soon", "levelname": "CRITICAL"})

    record = caplog.records[-1]
    assert record.name == "trawl.package.dumpspider"
    assert (record.getMessage(), record.levelname, record.exc_info, record.stack_info) == (
        "hello %s",
        "WARNING",
        None,
        None,
    )


def test_a_child_redis_user_is_its_own_and_leftovers_of_dead_workers_are_swept(db, redis_server, settings):
    settings.TRAWL_INSTALLATION_ID = "feedc0de"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = f"{_user_prefix()}{dead.stdout.strip()}-0000"
    get_redis().execute_command("ACL", "SETUSER", leftover, "on", ">x")

    # This machine's Redis has no password: allowed here (tests/runtime/test_child_redis_passwords.py refuses it).
    grant = child_redis_grant(url=settings.REDIS_URL, acl=True, nopass_allowed=True)
    try:
        users = get_redis().execute_command("ACL", "USERS")
        assert child_redis_sweep() == [], "a live worker's user stays"
        child = redis.Redis.from_url(grant.url, decode_responses=True)
        assert grant.user in users and leftover not in users, "a killed worker's child user is deleted"
        bucket = "trawl:feedc0de:throttle:bucket:{example.com}:example.com"
        assert child.set(bucket, "1 1") and child.delete(bucket)
        with pytest.raises(redis.exceptions.NoPermissionError):
            child.set("trawl:feedc0de:frontier:{1}:queue", "forged")
        child_redis_keys(grant, crawl={"TRAWL_FRONTIER": {"job": "1"}})
        assert child.set("trawl:feedc0de:frontier:{1}:queue", "mine") and child.delete(
            "trawl:feedc0de:frontier:{1}:queue"
        )
    finally:
        child_redis_revoke(grant)
    assert grant.user not in get_redis().execute_command("ACL", "USERS")


def test_without_acl_the_child_gets_the_redis_url(settings):
    assert child_redis_grant(url=settings.REDIS_URL, acl=False) == ChildRedis(url=settings.REDIS_URL)
