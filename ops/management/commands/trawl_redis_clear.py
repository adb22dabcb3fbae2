"""`manage.py trawl_redis_clear`: delete this installation's Redis keys (`make clean` runs it before removing var/)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from project.redis import installation_keys_clear
from project.redis.installation import installation_id


class Command(BaseCommand):
    help = (
        "Delete every Redis key of this installation (counters, flags, caches, buckets, job logs): keys of other "
        "installations and Celery's broker keys stay."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        deleted = installation_keys_clear()
        self.stdout.write(f"installation {installation_id()}: deleted {deleted} Redis keys")
