"""Beat's sampler: queue depths over time for the dashboard, and which workers answer."""

from __future__ import annotations

from celery import shared_task


# Samples are only worth having fresh: a late one is skipped rather than run after the next is due.
@shared_task(name="ops.tasks.sample_ops", expires=60, ignore_result=True)
def sample_ops() -> dict:
    from ops.services import ops_sample

    return ops_sample()
