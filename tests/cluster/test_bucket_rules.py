"""tests/throttling/test_bucket_rules.py again, with Trawl's state on a 3-master Redis Cluster:
the rule mirror and blocked domains."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.throttling.test_bucket_rules import *  # noqa: F403 - every test of that module, run here on the cluster
