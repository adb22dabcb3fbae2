"""Throttle rules and proxies. Rules live in the database, mirrored into Redis where the bucket script reads them.

Every write goes through these services, which publish the change to Redis when its transaction commits, so running
crawls obey it from their next request on. The mirror does not expire: a change made another way (a shell, a
fixture) is found by one process of the fleet every TRAWL_THROTTLE_RULES_TTL seconds (jittered), which compares the
rules' version in the database (count, newest change, highest id) with the one the mirror was loaded from and
reloads only when they differ; takes keep being answered from the old mirror while it does (never "stale").
"""

from __future__ import annotations

from throttling.services.mirror import throttle_rules_check, throttle_rules_load, throttle_rules_signature
from throttling.services.rules import (
    FIELDS,
    default_limits,
    domain_normalize,
    proxies_cool_down_end,
    proxy_cool_down,
    throttle_adaptive_states,
    throttle_buckets,
    throttle_check_url,
    throttle_controller,
    throttle_create,
    throttle_delete,
    throttle_effective,
    throttle_for_host,
    throttle_limits,
    throttle_publish,
    throttle_robots,
    throttle_robots_many,
    throttle_save,
    throttle_update,
)

__all__ = [
    "FIELDS",
    "default_limits",
    "domain_normalize",
    "proxies_cool_down_end",
    "proxy_cool_down",
    "throttle_adaptive_states",
    "throttle_buckets",
    "throttle_check_url",
    "throttle_controller",
    "throttle_create",
    "throttle_delete",
    "throttle_effective",
    "throttle_for_host",
    "throttle_limits",
    "throttle_publish",
    "throttle_robots",
    "throttle_robots_many",
    "throttle_rules_check",
    "throttle_rules_load",
    "throttle_rules_signature",
    "throttle_save",
    "throttle_update",
]
