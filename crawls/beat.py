"""Beat with a leader: run two (or more) beats for availability and every periodic task still runs once per period.

Each beat ticks as usual, but only the one holding a Redis lease sends anything; the others wait and try to take the
lease over. When a follower becomes leader it re-reads the schedule (and each task's last run) from the database, so
it picks up where the old leader stopped. Redis away: nobody leads, and nothing could be sent anyway.
"""

from __future__ import annotations

import contextlib
import logging

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django_celery_beat.schedulers import DatabaseScheduler

from project.redis.lease import Lease

logger = logging.getLogger("trawl.beat")


class LeaderScheduler(DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler, sending only while this beat holds the `beat` lease."""

    def __init__(self, *args, **kwargs) -> None:
        self._lease: Lease | None = None
        self._leading = False
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs) -> float:
        try:
            if not self._lead():
                return min(self.max_interval, settings.TRAWL_BEAT_LEASE_SECONDS / 3)
            return min(super().tick(*args, **kwargs), settings.TRAWL_BEAT_LEASE_SECONDS / 3)
        except DatabaseError as exc:
            # The schedule is read from the database on every tick, and beat's service loop exits on any exception
            # from tick(): a PostgreSQL restart would end beat. Wait it out instead.
            logger.warning("beat: database unavailable (%s); sending again once it answers", exc)
            self._database_lost()
            return min(self.max_interval, settings.TRAWL_BEAT_LEASE_SECONDS / 3)

    def _database_lost(self) -> None:
        with contextlib.suppress(DatabaseError):
            connection.close()  # the next query opens a new connection instead of reusing the broken one
        if self._leading or self._lease is None:
            return
        # The lease was taken but the schedule could not be read: let go, so the next tick takes it and reads again.
        with contextlib.suppress(redis.RedisError):
            self._lease.release()

    def _lead(self) -> bool:
        """Renew the lease if we hold it, else try to take it; True while this beat leads."""
        try:
            if self._lease is None:
                self._lease = Lease("beat", seconds=settings.TRAWL_BEAT_LEASE_SECONDS)
            leading = self._lease.renew() if self._leading else self._lease.acquire()
        except redis.RedisError as exc:
            logger.warning("beat: lease unreadable (%s); not sending until Redis answers", exc)
            leading = False
        if leading and not self._leading:
            logger.info("beat: this beat leads now; reading the schedule from the database")
            self._schedule = self.all_as_schedule()  # the last runs the previous leader recorded
            self._heap_invalidated = True
        elif self._leading and not leading:
            logger.warning("beat: lost the lease; another beat sends now")
        self._leading = leading
        return leading

    def close(self) -> None:
        super().close()
        if self._leading and self._lease is not None:
            with contextlib.suppress(redis.RedisError):
                self._lease.release()  # a standby takes over at once instead of after the lease expires
