"""tests/ops/test_stats.py again, with Trawl's state on a 3-master Redis Cluster:
the ops counters (minute, hour, lifetime buckets)."""

from tests.ops.conftest import stats_prefix  # noqa: F401 - the fixture those tests use
from tests.ops.test_stats import *  # noqa: F403 - every test of that module, run here on the cluster
from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
