"""The workers seen: from the jobs they ran (the database) and from who answers Celery's broadcast (inspect).

A crawl job records `worker` as `<celery node name>/<pid>` and heartbeats while it runs, so the database alone knows
every node that ran a job recently, when it last heartbeated and how many jobs it runs now. Idle or stuck nodes only
show up by asking: beat's sample asks `inspect active` with a short timeout and caches the answer in Redis, so
reading the workers never waits on a broadcast (`refresh=True` asks now).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from project.celery import app
from project.redis import get_redis, stats_key

RUN_CRAWL = "crawls.tasks.run_crawl"
SAMPLER = "ops.tasks.sample_ops"


def workers_from_jobs(*, now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """Nodes that ran a job within TRAWL_STATS_WORKERS_SECONDS, or run one now: last heartbeat, jobs running."""
    since = (now or timezone.now()) - timedelta(seconds=settings.TRAWL_STATS_WORKERS_SECONDS)
    rows = (
        CrawlJob.objects.filter(Q(heartbeat_at__gte=since) | Q(status=JobStatus.RUNNING))
        .exclude(worker="")
        .values("worker")
        .annotate(last=Max("heartbeat_at"), running=Count("id", filter=Q(status=JobStatus.RUNNING)))
    )
    nodes: dict[str, dict[str, Any]] = {}
    for row in rows:
        hostname = row["worker"].rsplit("/", 1)[0]
        node = nodes.setdefault(hostname, {"hostname": hostname, "last_heartbeat": None, "jobs_running": 0})
        if row["last"] and (node["last_heartbeat"] is None or row["last"] > node["last_heartbeat"]):
            node["last_heartbeat"] = row["last"]
        node["jobs_running"] += row["running"]
    return nodes


def workers_live(*, timeout: float | None = None) -> dict[str, dict[str, Any]]:
    """Ask every node what it runs now. Nodes that do not answer within `timeout` are simply missing."""
    timeout = settings.TRAWL_STATS_INSPECT_TIMEOUT if timeout is None else timeout
    active = app.control.inspect(timeout=timeout).active() or {}
    # The sample asking is itself an active task on its node: not work anyone would want counted.
    active = {host: [t for t in tasks if t.get("name") != SAMPLER] for host, tasks in active.items()}
    return {
        hostname: {
            "active_tasks": len(tasks),
            "crawls": [task["args"][0] for task in tasks if task.get("name") == RUN_CRAWL and task.get("args")],
        }
        for hostname, tasks in active.items()
    }


def _live_key() -> str:
    return stats_key("workers_live")


def workers_live_store(*, timeout: float | None = None) -> dict[str, dict[str, Any]]:
    live = workers_live(timeout=timeout)
    # Kept a few sample periods only: an answer older than that says nothing about now.
    ttl = max(60, 3 * settings.TRAWL_STATS_SAMPLE_SECONDS)
    get_redis().set(_live_key(), json.dumps({"t": time.time(), "workers": live}), ex=ttl)
    return live


def workers_live_cached() -> tuple[float | None, dict[str, dict[str, Any]]]:
    raw = get_redis().get(_live_key())
    if not raw:
        return None, {}
    sample = json.loads(raw)
    return sample["t"], sample["workers"]


def workers_report(*, refresh: bool = False) -> list[dict[str, Any]]:
    """One row per node, from both sources. `online` is None when no broadcast answer is known (no recent sample)."""
    nodes = workers_from_jobs()
    if refresh:
        asked_at, live = time.time(), workers_live_store()
    else:
        asked_at, live = workers_live_cached()
    for hostname in live:
        nodes.setdefault(hostname, {"hostname": hostname, "last_heartbeat": None, "jobs_running": 0})
    rows = []
    for hostname, node in sorted(nodes.items()):
        answer = live.get(hostname)
        rows.append(
            {
                **node,
                "online": None if asked_at is None else answer is not None,
                "active_tasks": answer["active_tasks"] if answer else None,
                "seen_at": datetime.fromtimestamp(asked_at, tz=UTC) if answer else None,
            }
        )
    return rows
