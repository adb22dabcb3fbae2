"""A worker node's presence beat (project/presence.py): the workers list and health probes read it instead of
broadcasting to the fleet, and the same beat keeps two hosts off one egress label."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from project.presence import egress_claim, presence_read, presence_recent, presence_write
from project.redis import get_redis, stats_key
from tests import workers
from tests.workers import BASE_DIR, Worker


@pytest.fixture
def presence_keys(db, settings):
    """Beats and claims of this test only: the session's real workers beat into the default keys meanwhile."""
    settings.TRAWL_PRESENCE_SECONDS = 10
    settings.TRAWL_STATS_PREFIX = f"test-presence:{uuid.uuid4().hex[:12]}"
    yield
    get_redis().delete(stats_key("workers"), stats_key("egress_hosts"))


def test_a_beat_is_read_while_recent_and_forgotten_when_long_gone(presence_keys):
    now = time.time()
    presence_write("crawl@a", active=[{"name": "crawls.tasks.run_crawl", "job": 7}], now=now)
    presence_write("crawl@b", active=[], now=now - 31)  # three periods missed: gone
    presence_write("crawl@c", active=[], now=now - 1000)  # long gone: deleted on the way

    alive = presence_read(now=now)

    assert set(alive) == {"crawl@a"} and alive["crawl@a"]["crawls"] == [7]
    assert presence_recent("crawl@a", now=now) and not presence_recent("crawl@b", now=now)
    assert set(get_redis().hkeys(stats_key("workers"))) == {"crawl@a", "crawl@b"}


def test_two_hosts_on_one_egress_label_are_refused_unless_shared(presence_keys, settings):
    settings.TRAWL_EGRESS_LABEL = "ip-1"
    other = json.dumps({"host": "another-host", "t": time.time()})
    get_redis().hset(stats_key("egress_hosts"), "ip-1", other)

    with pytest.raises(ImproperlyConfigured, match="TRAWL_EGRESS_LABEL 'ip-1' is already used by host 'another-host'"):
        egress_claim()

    settings.TRAWL_EGRESS_SHARED = True
    egress_claim()  # hosts behind one address say so
    settings.TRAWL_EGRESS_SHARED = False
    get_redis().hset(stats_key("egress_hosts"), "ip-1", json.dumps({"host": "another-host", "t": time.time() - 60}))
    egress_claim()  # a holder silent for three periods is gone: its label is free


def test_the_egress_label_defaults_to_the_host_name():
    env = {k: v for k, v in os.environ.items() if k != "TRAWL_EGRESS_LABEL"}
    script = "from project import env; import socket; print(env.EGRESS_LABEL == socket.gethostname())"
    done = subprocess.run([sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


def probe(node: str) -> subprocess.CompletedProcess:
    """The containers' health probe, run as they run it, against this test's database and Redis."""
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "REDIS_URL": settings.REDIS_URL}
    env["DJANGO_SETTINGS_MODULE"] = "project.settings"
    command = [sys.executable, "-m", "project.presence", node]
    return subprocess.run(command, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60)


def test_a_real_worker_beats_is_probed_locally_and_leaves_on_stop(db, redis_server, tmp_path):
    worker = Worker(queues="control", log_dir=tmp_path).start()
    try:
        deadline = time.monotonic() + 60
        while worker.hostname not in presence_read() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert presence_read()[worker.hostname]["pid"] == worker.process.pid
        assert probe(worker.hostname).returncode == 0
    finally:
        worker.stop()
    assert worker.hostname not in presence_read()
    done = probe(worker.hostname)
    assert done.returncode == 1 and "no recent beat" in done.stdout


def test_a_worker_whose_egress_label_another_host_holds_does_not_start(db, redis_server, tmp_path):
    get_redis().hset(stats_key("egress_hosts"), "taken", json.dumps({"host": "another-host", "t": time.time()}))
    worker = Worker(queues="control", env={"TRAWL_EGRESS_LABEL": "taken"}, log_dir=tmp_path)
    try:
        with pytest.raises(RuntimeError, match="worker exited"):
            worker.start()
        assert "TRAWL_EGRESS_LABEL 'taken' is already used by host 'another-host'" in worker.log_tail()
    finally:
        worker.stop()
        get_redis().hdel(stats_key("egress_hosts"), "taken")
