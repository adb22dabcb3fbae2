"""tests/runtime/test_frontier_leases.py again, with Trawl's state on a 3-master Redis Cluster:
the frontier's scripts (leases, reclaim, leaving, a lease renewed while the reactor is held)."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.runtime.test_frontier_leases import *  # noqa: F403 - every test of that module, run here on the cluster
