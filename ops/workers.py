"""The workers seen: from the jobs they ran (the database) and from the nodes' own presence beats (Redis).

A crawl job records `worker` as `<celery node name>/<pid>` and heartbeats while it runs, so the database alone knows
every node that ran a job recently, when it last heartbeated and how many jobs it runs now. Idle nodes show up by
their presence beat (project/presence.py), which each node writes itself: nobody broadcasts to the fleet to list it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from project.presence import presence_read


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


def workers_live() -> dict[str, dict[str, Any]]:
    """Nodes whose presence beat is recent (project/presence.py): what each runs now, from its own last beat."""
    return {
        hostname: {"active_tasks": beat["active_tasks"], "crawls": beat["crawls"], "seen_at": beat["t"]}
        for hostname, beat in presence_read().items()
    }


def workers_report() -> list[dict[str, Any]]:
    """One row per node, from both sources: every node seen in either, `online` when its presence beat is recent."""
    nodes = workers_from_jobs()
    live = workers_live()
    for hostname in live:
        nodes.setdefault(hostname, {"hostname": hostname, "last_heartbeat": None, "jobs_running": 0})
    rows = []
    for hostname, node in sorted(nodes.items()):
        answer = live.get(hostname)
        rows.append(
            {
                **node,
                "online": answer is not None,
                "active_tasks": answer["active_tasks"] if answer else None,
                "seen_at": datetime.fromtimestamp(answer["seen_at"], tz=UTC) if answer else None,
            }
        )
    return rows
