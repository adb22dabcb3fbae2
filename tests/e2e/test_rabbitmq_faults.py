"""A crawl whose pool process is SIGKILLed mid-crawl, with RabbitMQ as the broker
(tests/e2e/test_faults_killed_workers.py on Redis): its message comes back (acks_late + reject_on_worker_lost; RabbitMQ
redelivers at once when a consumer's channel closes, where Redis waits for its visibility timeout) and the job finishes
as attempt 2 without duplicates."""

from __future__ import annotations

import pytest

from tests.e2e.faults_stack import slow_site
from tests.e2e.rabbitmq import on_rabbitmq
from tests.e2e.test_faults_killed_workers import (
    cluster,
    test_a_crawl_whose_worker_process_is_killed_finishes_as_attempt_2_without_duplicate_items,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = [
    "cluster",
    "on_rabbitmq",
    "slow_site",
    "test_a_crawl_whose_worker_process_is_killed_finishes_as_attempt_2_without_duplicate_items",
]
