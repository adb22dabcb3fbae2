"""Reads about requesters."""

from __future__ import annotations

from django.conf import settings

from access.models import Requester


def requester_shard_cap(*, requester: Requester) -> int | None:
    """The most shards (queued + running; a job with parallelism N counts N) `requester` may have, None for no cap:
    its own max_active_jobs, else TRAWL_DEFAULT_MAX_ACTIVE_JOBS (0 turns that off). The default is for ordinary
    requesters: an admin is capped only by a max_active_jobs of its own."""
    if requester.max_active_jobs is not None:
        return requester.max_active_jobs
    default = int(settings.TRAWL_DEFAULT_MAX_ACTIVE_JOBS or 0)
    return default if default > 0 and not requester.is_admin else None
