"""tests/runtime/test_frontier_layout.py again, with Trawl's state on a 3-master Redis Cluster: the queue's chunks, the
bucketed seen-set, the old layout read, idempotent commits."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.runtime.test_frontier_layout import *  # noqa: F403 - every test of that module, run here on the cluster
