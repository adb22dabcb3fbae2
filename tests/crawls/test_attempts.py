"""The one rule for whether a job whose attempt was cut short runs again (crawls.services.lifecycle.attempt_verdict):
which causes spend an attempt, and when `max_attempts` ends the job. Pure: no database, no Redis."""

from __future__ import annotations

import pytest

from crawls.services.lifecycle import AttemptCause, AttemptVerdict, attempt_verdict
from crawls.states import ErrorClass

AGAIN_SPENT = AttemptVerdict(again=True, spends_attempt=True)
AGAIN_FREE = AttemptVerdict(again=True, spends_attempt=False)
DEAD = AttemptVerdict(again=False, spends_attempt=False, error_class=ErrorClass.WORKER_LOST)
STALLED = AttemptVerdict(again=False, spends_attempt=False, error_class=ErrorClass.REACTOR_STALLED)
GREW = AttemptVerdict(again=False, spends_attempt=False, error_class=ErrorClass.MEMORY_EXCEEDED)


@pytest.mark.parametrize(
    ("cause", "attempt", "max_attempts", "verdict"),
    [
        # The reaper: a stale heartbeat spends an attempt, and after the last one the job ends dead / worker_lost.
        (AttemptCause.WORKER_LOST, 1, 3, AGAIN_SPENT),
        (AttemptCause.WORKER_LOST, 2, 3, AGAIN_SPENT),
        (AttemptCause.WORKER_LOST, 3, 3, DEAD),
        (AttemptCause.WORKER_LOST, 4, 3, DEAD),  # handed back past its last attempt by a warm shutdown
        (AttemptCause.WORKER_LOST, 1, 1, DEAD),
        # A warm shutdown spends an attempt but never ends the job: a rolling update must not kill crawls.
        (AttemptCause.WARM_SHUTDOWN, 1, 3, AGAIN_SPENT),
        (AttemptCause.WARM_SHUTDOWN, 3, 3, AGAIN_SPENT),
        # Trawl's own faults are not the job's: one more attempt, none spent, whatever the count.
        (AttemptCause.INFRASTRUCTURE, 1, 3, AGAIN_FREE),
        (AttemptCause.INFRASTRUCTURE, 3, 3, AGAIN_FREE),
        (AttemptCause.FRONTIER_LOST, 1, 3, AGAIN_FREE),
        (AttemptCause.FRONTIER_LOST, 3, 3, AGAIN_FREE),
        # A crawl that held its process's reactor spends an attempt and, after the last, ends failed: a job that
        # stalls every process it runs in is not retried forever. Its bystanders lose nothing.
        (AttemptCause.REACTOR_STALLED, 1, 3, AGAIN_SPENT),
        (AttemptCause.REACTOR_STALLED, 3, 3, STALLED),
        (AttemptCause.PROCESS_RECYCLED, 1, 3, AGAIN_FREE),
        (AttemptCause.PROCESS_RECYCLED, 3, 3, AGAIN_FREE),
        # A process past its memory bound hands every crawl back, not knowing which grew it: each spends an attempt,
        # and a job whose every attempt ends so is not retried forever.
        (AttemptCause.MEMORY_RECYCLED, 1, 3, AGAIN_SPENT),
        (AttemptCause.MEMORY_RECYCLED, 3, 3, GREW),
    ],
)
def test_the_decision_table(cause, attempt, max_attempts, verdict):
    assert attempt_verdict(cause=cause, attempt=attempt, max_attempts=max_attempts) == verdict


@pytest.mark.parametrize("cause", list(AttemptCause))
def test_every_cause_has_a_verdict_on_every_attempt(cause):
    for attempt in range(1, 6):
        verdict = attempt_verdict(cause=cause, attempt=attempt, max_attempts=3)
        assert verdict.again or verdict.error_class, (cause, attempt)


def test_only_a_lost_worker_a_stalled_reactor_and_a_process_past_its_memory_bound_end_a_job():
    ending = {cause for cause in AttemptCause if not attempt_verdict(cause=cause, attempt=9, max_attempts=1).again}
    assert ending == {AttemptCause.WORKER_LOST, AttemptCause.REACTOR_STALLED, AttemptCause.MEMORY_RECYCLED}
