"""Batches with a webhook receiver, run again with RabbitMQ as the broker (tests/e2e/test_batches_e2e.py on Redis):
the chord of a 20-job batch yields exactly one signed `batch.completed`, and a cancelled batch stops its running
crawls and completes once, cancelled. Chord results stay on Redis (the result backend is REDIS_URL unless
CELERY_RESULT_BACKEND says otherwise)."""

from __future__ import annotations

import pytest

from tests.e2e.rabbitmq import on_rabbitmq
from tests.e2e.test_batches_e2e import (
    cluster,
    receiver,
    slow_site,
    test_batch_of_20_with_3_bad_jobs_yields_one_signed_batch_completed,
    test_cancelled_batch_stops_its_running_crawls_and_completes_cancelled,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = [
    "cluster",
    "on_rabbitmq",
    "receiver",
    "slow_site",
    "test_batch_of_20_with_3_bad_jobs_yields_one_signed_batch_completed",
    "test_cancelled_batch_stops_its_running_crawls_and_completes_cancelled",
]
