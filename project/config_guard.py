"""Configurations that cannot work, refused as a process starts, with a message naming the setting to change.

Started anyway they fail later and far from the cause: with REDIS_URL on a Redis Cluster and the Celery settings
left to default to it, every process starts and every task's end raises MovedError in the workers (Celery's Redis
transport and result store use keys of many slots in one command).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from project.redis import is_cluster_url


def unworkable_reasons(*, broker_url: str, result_backend: str, broker_set: bool, backend_set: bool) -> list[str]:
    """What is wrong with these engine settings, one sentence per problem (empty when they can work)."""
    reasons = []
    for name, url, was_set, instead in (
        ("CELERY_BROKER_URL", broker_url, broker_set, "a single Redis or RabbitMQ"),
        ("CELERY_RESULT_BACKEND", result_backend, backend_set, "a single Redis"),
    ):
        if not is_cluster_url(url):
            continue
        origin = f"{name} names a Redis Cluster" if was_set else f"REDIS_URL names a Redis Cluster and {name} is unset"
        reasons.append(f"{origin} ({url}): Celery cannot use a cluster; set {name} to {instead} (docs/brokers.md)")
    return reasons


def refuse_unworkable(environ, *, broker_url: str, result_backend: str) -> None:
    reasons = unworkable_reasons(
        broker_url=broker_url,
        result_backend=result_backend,
        broker_set=bool(environ.get("CELERY_BROKER_URL")),
        backend_set=bool(environ.get("CELERY_RESULT_BACKEND")),
    )
    if reasons:
        raise ImproperlyConfigured("; ".join(reasons))
