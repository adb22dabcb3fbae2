"""RabbitMQ as the broker for end-to-end tests: a vhost of our own, and this process's Celery app pointed at it.

`on_rabbitmq` is an autouse module fixture: a module that imports it runs every test on RabbitMQ — the workers and
beat it starts inherit CELERY_BROKER_URL from this process's environment, and this process publishes and sends
control commands through the same broker. Trawl's state stays on the session's Redis (REDIS_URL). Skipped, with the
reason, only when nothing answers on 127.0.0.1:5672 or rabbitmqctl cannot make the vhost.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit

import kombu.pools
import pytest
from django.conf import settings

from project.celery import app
from project.messaging.brokers import step_broker_priority

HOST, PORT = "127.0.0.1", 5672
# Each module deletes and recreates the vhost: one per Redis database, as every test run (and each pytest-xdist
# worker) has its own, so two runs on one machine never empty each other's queues.
VHOST = f"trawl_rabbit_tests_{urlsplit(settings.REDIS_URL).path.strip('/') or 0}"
URL = f"amqp://guest:guest@{HOST}:{PORT}/{VHOST}"


def _answers() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=2):
            return True
    except OSError:
        return False


def rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)


def fresh_vhost() -> None:
    """Our vhost, empty: queues left by an earlier module (or run) would hand their messages to our workers."""
    if not _answers():
        pytest.skip(f"no RabbitMQ answers on {HOST}:{PORT}")
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl is missing: cannot create the test vhost (pyamqp cannot)")
    rabbitmqctl("delete_vhost", VHOST)  # absent the first time: fine
    for args in (("add_vhost", VHOST), ("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")):
        done = rabbitmqctl(*args)
        if done.returncode != 0:
            pytest.skip(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")


def _reconnect() -> None:
    """Drop the pooled broker connections (kombu's registry too, which would hand back the closed pool), so the next
    publish opens one to the broker now configured."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


def purge(*names: str) -> None:
    """Empty these queues, declaring them first (as celeryconfig does) if nothing has yet."""
    with app.connection_for_write() as connection:
        channel = connection.channel()
        for queue in app.conf.task_queues:
            if queue.name in names:
                bound = queue(channel)
                bound.declare()
                bound.purge()
        channel.close()


@pytest.fixture(scope="module", autouse=True)
def on_rabbitmq() -> Iterator[str]:
    fresh_vhost()
    saved_env, saved_priority = os.environ.get("CELERY_BROKER_URL"), app.conf.task_default_priority
    os.environ["CELERY_BROKER_URL"] = URL  # Celery reads it before its own setting; so do the processes we start
    app.conf.task_default_priority = step_broker_priority(5, url=URL)  # as celeryconfig computes it there
    _reconnect()
    try:
        yield URL
    finally:
        if saved_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env
        app.conf.task_default_priority = saved_priority
        _reconnect()
