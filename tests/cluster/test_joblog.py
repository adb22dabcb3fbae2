"""tests/ops/test_joblog.py again, with Trawl's state on a 3-master Redis Cluster:
job logs (head, tail, shards, stored)."""

from tests.ops.test_joblog import *  # noqa: F403 - every test of that module, run here on the cluster
from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
