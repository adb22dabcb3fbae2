"""tests/runtime/test_incremental.py again, with Trawl's state on a 3-master Redis Cluster:
the incremental cache and sitemap lastmods (asyncio cluster clients, pipelines split by node)."""

from tests.redis_cluster import on_redis_cluster  # noqa: F401 - autouse: REDIS_URL is the cluster's
from tests.runtime.test_incremental import *  # noqa: F403 - every test of that module, run here on the cluster
