"""The durable-crawl paths of tests/e2e/test_frontier_*.py, run again with RabbitMQ as the broker: a SIGKILLed crawl
resumes from its frontier (acks_late + reject_on_worker_lost, and the reaper's republish), a SIGTERMed worker hands
its crawl back at once, a `parallelism: 2` crawl fetches every page once, and cancelling it stops every shard."""

from __future__ import annotations

import pytest

from tests.e2e.frontier_stack import cluster, fast_throttle, slow_reaper_cluster, tree_site
from tests.e2e.rabbitmq import on_rabbitmq
from tests.e2e.test_frontier_handover import (
    test_a_crawl_whose_worker_gets_sigterm_continues_on_another_worker_at_once,
    test_a_killed_crawl_resumes_from_its_frontier_and_fetches_only_in_flight_pages_again,
)
from tests.e2e.test_frontier_parallel import (
    test_cancelling_a_parallel_crawl_stops_every_shard,
    test_parallelism_2_over_two_processes_fetches_every_page_once,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = [
    "cluster",
    "fast_throttle",
    "on_rabbitmq",
    "slow_reaper_cluster",
    "test_a_crawl_whose_worker_gets_sigterm_continues_on_another_worker_at_once",
    "test_a_killed_crawl_resumes_from_its_frontier_and_fetches_only_in_flight_pages_again",
    "test_cancelling_a_parallel_crawl_stops_every_shard",
    "test_parallelism_2_over_two_processes_fetches_every_page_once",
    "tree_site",
]
