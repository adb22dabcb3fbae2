"""Thin Celery tasks for webhooks: `deliver` runs on the callbacks queue (celeryconfig), consumed by a worker of its
own (Procfile's `hooks`), so a slow receiver never holds a process that the reaper, dispatch or sweeps need."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from callbacks.services import RESOLVE_ALLOWANCE_SECONDS, deliveries_sweep, delivery_attempt

# A backstop only: the POST ends at its own deadline (callbacks/transport.py). The soft limit is caught and recorded
# as a failed attempt (callbacks.services); the hard one follows if even that hangs.
DELIVER_SOFT_LIMIT = settings.TRAWL_WEBHOOK_DEADLINE_SECONDS + RESOLVE_ALLOWANCE_SECONDS
DELIVER_HARD_LIMIT = DELIVER_SOFT_LIMIT + 15


# max_retries=None: the attempt budget lives on the Delivery row (max_attempts), so "deliver again" can extend it.
@shared_task(
    bind=True,
    name="callbacks.tasks.deliver",
    acks_late=True,
    max_retries=None,
    ignore_result=True,
    soft_time_limit=DELIVER_SOFT_LIMIT,
    time_limit=DELIVER_HARD_LIMIT,
)
def deliver(self, delivery_id: str) -> str:
    outcome = delivery_attempt(delivery_id=delivery_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


# Housekeeping: no task events, so Flower's task list shows deliveries and crawls, not this sweep. Beat sends it to
# the control queue (project/periodic.py): a quick query and publishes, never a POST.
@shared_task(name="callbacks.tasks.sweep_deliveries", ignore_result=True, send_events=False)
def sweep_deliveries() -> int:
    return deliveries_sweep()
