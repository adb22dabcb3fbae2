"""An installation's keys on a Redis Cluster: spread over every primary, all found and deleted by `make clean`
(`installation_keys_clear`), none of another installation's."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from crawls.live.cancel import cancel_request
from project.redis import get_redis, installation_keys_clear, on_cluster, redis_key
from tests.redis_cluster import on_redis_cluster

pytestmark = pytest.mark.django_db
__all__ = ["on_redis_cluster"]


def test_make_clean_deletes_this_installation_s_keys_on_every_primary_and_no_one_else_s():
    client = get_redis()
    assert on_cluster(client)
    for job in range(30):
        cancel_request(job_id=f"job-{job}")
    other = "trawl:someone-else:cancel:job:{1}"
    client.set(other, "1")
    mine = list(client.scan_iter(match=redis_key("*")))
    owners = {client.nodes_manager.get_node_from_slot(key_slot(key.encode())).name for key in mine}
    assert len(mine) >= 30 and len(owners) == 3, "the keys should live on all three primaries"
    assert installation_keys_clear() == len(mine)
    assert list(client.scan_iter(match=redis_key("*"))) == []
    assert client.get(other) == "1"
    client.delete(other)
