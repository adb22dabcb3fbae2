"""The job-log paths of tests/e2e/test_ops_e2e.py with Trawl's state on a 3-master Redis Cluster and a real worker
(the broker stays the session's plain Redis): the log is readable while the crawl runs and after its pool process
is recycled, and a worker killed mid-crawl leaves its log readable."""

from __future__ import annotations

import pytest

from tests.e2e.test_ops_e2e import (
    ops_worker,
    test_job_log_is_readable_while_running_and_after_the_worker_process_is_recycled,
    test_log_of_a_worker_killed_mid_crawl_stays_readable,
    test_log_survives_the_pool_process_that_wrote_it,
    waiter,
)
from tests.redis_cluster import on_redis_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = [
    "on_redis_cluster",
    "ops_worker",
    "test_job_log_is_readable_while_running_and_after_the_worker_process_is_recycled",
    "test_log_of_a_worker_killed_mid_crawl_stays_readable",
    "test_log_survives_the_pool_process_that_wrote_it",
    "waiter",
]
