"""tests/runtime/test_frontier_queue.py again, with Trawl's state on a 3-master Redis Cluster:
the frontier's scripts (queue order, the seen-set, in flight, kept back, expiry)."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.runtime.test_frontier_queue import *  # noqa: F403 - every test of that module, run here on the cluster
