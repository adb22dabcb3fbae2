"""The tasks of one crawl host process claim their jobs in the order their messages came.

The broker hands a worker its messages highest priority first, and the pool sends them to a process in that order,
but the process starts them together, each on a thread of its own: left alone, the threads' claims race, and the
urgent job that came first may be claimed after a dozen of the backlog it overtook in the queue (its `started_at`
says so, and so does fair share, which decides at the claim whose job a slot runs). Each task gets a ticket as it
comes (only tasks that claim: `claims_in_order`); a claim waits until every earlier ticket has claimed or ended, for
at most TURN_WAIT_SECONDS, after which the earlier ones no longer hold any claim.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("trawl.pool")
TURN_WAIT_SECONDS = 30.0  # a claim stuck that long (the database away) does not hold the later ones any more


class Turns:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._issued = 0
        self._next = 0  # every ticket below it has claimed or ended
        self._done: set[int] = set()

    def issue(self) -> int:
        with self._changed:
            ticket, self._issued = self._issued, self._issued + 1
            return ticket

    def wait(self, ticket: int, timeout: float = TURN_WAIT_SECONDS) -> bool:
        """Until every earlier ticket is done; False if it was not within `timeout` (it goes anyway)."""
        with self._changed:
            if self._changed.wait_for(lambda: self._next >= ticket, timeout):
                return True
            logger.warning("claim %s did not get its turn within %.0fs: it goes now", ticket, timeout)
            self._done = {done for done in self._done if done > ticket}
            self._next = ticket  # what held it holds no later claim either
            self._changed.notify_all()
            return False

    def done(self, ticket: int) -> None:
        """The ticket's claim is over (or its task ended without one); a second call is a no-op."""
        with self._changed:
            if ticket < self._next:
                return
            self._done.add(ticket)
            while self._next in self._done:
                self._done.discard(self._next)
                self._next += 1
            self._changed.notify_all()
