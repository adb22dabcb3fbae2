"""tests/throttling/test_adaptive_rule.py again, with Trawl's state on a 3-master Redis Cluster:
the adaptive rule's states."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.throttling.test_adaptive_rule import *  # noqa: F403 - every test of that module, run here on the cluster
