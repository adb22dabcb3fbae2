"""Each worker node says, every few seconds, that it is alive and what it runs: one field of one Redis hash per node.

The workers list, `make run`'s readiness and the containers' health probes read it there. Asking instead (Celery's
`inspect`/`ping` broadcasts) costs every node a reply to every asker: with a probe in every container and a sample
on a timer, the control traffic grows with the square of the fleet. A node's own write costs one HSET per period.

The same beat claims the node's egress label for its host: two hosts crawling under one label share one per-IP
bucket, so each gets a fraction of the rate a site allows an address, and the label says nothing true about either.
Hosts that really leave through one address (one NAT) say so with TRAWL_EGRESS_SHARED.

`python -m project.presence NODE` is the health probe: exit 0 when NODE's last beat is recent, 1 otherwise.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from project.redis import get_redis, stats_key

logger = logging.getLogger("trawl.workers")
RUN_CRAWL = "crawls.tasks.run_crawl"
# A beat older than this many periods means the node is gone (a killed host writes nothing on its way out).
PERIODS_ALIVE = 3


def host_name() -> str:
    return socket.gethostname()


def _nodes_key() -> str:
    return stats_key("workers")


def _egress_key() -> str:
    return stats_key("egress_hosts")


def _max_age() -> float:
    return PERIODS_ALIVE * settings.TRAWL_PRESENCE_SECONDS


def presence_write(nodename: str, *, active: list[dict[str, Any]], now: float | None = None) -> None:
    """Record that `nodename` is alive now and runs `active` (task name and, for crawls, the job id)."""
    beat = {
        "t": time.time() if now is None else now,
        "host": host_name(),
        "pid": os.getpid(),
        "egress": settings.TRAWL_EGRESS_LABEL,
        "active_tasks": len(active),
        "crawls": [task["job"] for task in active if task.get("job") is not None],
    }
    get_redis().hset(_nodes_key(), nodename, json.dumps(beat))


def presence_remove(nodename: str) -> None:
    get_redis().hdel(_nodes_key(), nodename)


def presence_read(*, now: float | None = None) -> dict[str, dict[str, Any]]:
    """Nodes whose last beat is recent, by node name. Beats of nodes gone for good are deleted on the way: the hash
    holds one field per live node (a fleet's size), never one per node that ever ran."""
    now = time.time() if now is None else now
    client = get_redis()
    alive, gone = {}, []
    for node, raw in client.hgetall(_nodes_key()).items():
        try:
            beat = json.loads(raw)
        except ValueError:
            gone.append(node)
            continue
        if now - float(beat.get("t", 0)) <= _max_age():
            alive[node] = beat
        elif now - float(beat.get("t", 0)) > 10 * _max_age():
            gone.append(node)
    if gone:
        client.hdel(_nodes_key(), *gone)
    return alive


def presence_recent(nodename: str, *, now: float | None = None) -> bool:
    raw = get_redis().hget(_nodes_key(), nodename)
    if not raw:
        return False
    now = time.time() if now is None else now
    return now - float(json.loads(raw).get("t", 0)) <= _max_age()


def egress_claim(*, now: float | None = None) -> None:
    """Claim this host's egress label, or raise ImproperlyConfigured naming TRAWL_EGRESS_LABEL when another live host
    holds it (unless TRAWL_EGRESS_SHARED says the hosts share one address)."""
    label, host = settings.TRAWL_EGRESS_LABEL, host_name()
    now = time.time() if now is None else now
    client = get_redis()
    raw = client.hget(_egress_key(), label)
    holder = json.loads(raw) if raw else None
    if (
        holder
        and holder.get("host") != host
        and now - float(holder.get("t", 0)) <= _max_age()
        and not settings.TRAWL_EGRESS_SHARED
    ):
        raise ImproperlyConfigured(
            f"TRAWL_EGRESS_LABEL {label!r} is already used by host {holder['host']!r}: each host that leaves through "
            "an address of its own needs its own label (unset, it is the host name); hosts behind one address set "
            "TRAWL_EGRESS_SHARED=true"
        )
    client.hset(_egress_key(), label, json.dumps({"host": host, "t": now}))


def egress_release() -> None:
    """Give up this host's claim on its label (a clean stop): a host replacing it under a new name starts at once."""
    client = get_redis()
    raw = client.hget(_egress_key(), settings.TRAWL_EGRESS_LABEL)
    if raw and json.loads(raw).get("host") == host_name():
        client.hdel(_egress_key(), settings.TRAWL_EGRESS_LABEL)


def _active_tasks() -> list[dict[str, Any]]:
    from celery.worker.state import active_requests

    tasks = []
    for request in list(active_requests):
        args = request.args if request.name == RUN_CRAWL else None
        tasks.append({"name": request.name, "job": args[0] if args else None})
    return tasks


class PresenceStep(bootsteps.StartStopStep):
    """A worker's beat, on the worker's own timer (its main process): claims the egress label as the worker starts,
    then writes the node's presence every TRAWL_PRESENCE_SECONDS, and removes it on a clean stop."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.timer_ref = None

    def start(self, worker) -> None:
        try:
            egress_claim()  # refuses to start before any crawl runs under a label another host uses
        except ImproperlyConfigured:
            raise
        except Exception as exc:  # Redis away as the worker starts: crawls wait for it anyway; claimed on a beat
            logger.warning("egress label not claimed yet: %s: %s", type(exc).__name__, exc)
        self._beat(worker)
        self.timer_ref = worker.timer.call_repeatedly(settings.TRAWL_PRESENCE_SECONDS, self._beat, (worker,))

    def _beat(self, worker) -> None:
        try:
            presence_write(worker.hostname, active=_active_tasks())
            egress_claim()
        except ImproperlyConfigured as exc:  # another host took the label while this one was away
            logger.error("%s", exc)
        except Exception as exc:  # Redis away: the node looks gone for a while, its crawls are not affected
            logger.warning("worker presence not written: %s: %s", type(exc).__name__, exc)

    def stop(self, worker) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
        with contextlib.suppress(Exception):  # stopping anyway; an unremoved beat expires by itself
            presence_remove(worker.hostname)
            egress_release()


def main(argv: list[str]) -> int:
    """The health probe: `python -m project.presence crawl@HOST` (no broadcast, one HGET)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if len(argv) != 1:
        print("usage: python -m project.presence NODE_NAME", file=sys.stderr)
        return 2
    alive = presence_recent(argv[0])
    print("ok" if alive else f"{argv[0]}: no recent beat")
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
