"""Thin Celery tasks for webhooks; `callbacks.tasks.*` runs on the callbacks queue (celeryconfig)."""

from __future__ import annotations

from celery import shared_task

from callbacks.services import deliveries_sweep, delivery_attempt


# max_retries=None: the attempt budget lives on the Delivery row (max_attempts), so "deliver again" can extend it.
@shared_task(bind=True, name="callbacks.tasks.deliver", acks_late=True, max_retries=None, ignore_result=True)
def deliver(self, delivery_id: str) -> str:
    outcome = delivery_attempt(delivery_id=delivery_id)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


# Housekeeping: no task events, so Flower's task list shows deliveries and crawls, not this sweep.
@shared_task(name="callbacks.tasks.sweep_deliveries", ignore_result=True, send_events=False)
def sweep_deliveries() -> int:
    return deliveries_sweep()
