"""How a shard learns its frontier is no longer its job's: raised by the store's scripts and by the lease keeper."""

from __future__ import annotations

from project.errors import InfrastructureUnavailable


class FrontierLost(InfrastructureUnavailable):
    """The job's frontier is gone from Redis (emptied, or restarted without its data) or belongs to a newer attempt:
    what this shard remembers is no longer the job's. Not the site's fault: the job is requeued and starts again."""


class FrontierEnded(FrontierLost):
    """The job ended meanwhile (another shard ended it: timeout, cancel, a watchdog) and its frontier went with it:
    this shard stops too (the requeue that follows a FrontierLost finds the job ended and does nothing)."""
