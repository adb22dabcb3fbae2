"""The cancel watch's one pipeline on a Redis Cluster: the flags of a process's crawls live on every primary."""

from __future__ import annotations

import pytest

from tests.crawls.test_cancel_watch import (
    test_fifty_crawls_ticking_read_their_flags_in_one_pipeline_and_see_a_cancel_at_the_next_reading,
)
from tests.redis_cluster import on_redis_cluster

pytestmark = pytest.mark.django_db
__all__ = [
    "on_redis_cluster",
    "test_fifty_crawls_ticking_read_their_flags_in_one_pipeline_and_see_a_cancel_at_the_next_reading",
]
