"""The Redis mirror of the throttle rules, which the bucket script reads: loaded in full, and checked against the
database's version of the rules now and then (see the package's docstring)."""

from __future__ import annotations

import logging
import random

import redis
from django.conf import settings
from django.db.models import Count, Max

from project.redis import get_redis, hash_tag
from throttling.buckets import TokenBuckets
from throttling.models import DomainThrottle
from throttling.services.rules import throttle_buckets, throttle_limits

logger = logging.getLogger("trawl.throttle")

_LOAD_LOCK_SECONDS = 30
_LOAD_CHUNK = 1000  # rules written per round trip while the mirror reloads
_FULL_RELOAD_PERIODS = 40  # with TRAWL_THROTTLE_RULES_TTL at 15 s: a full reload every 10 minutes at least


def throttle_rules_signature() -> str:
    """The rules' version in the database: any write (even one behind the services' back) changes it."""
    found = DomainThrottle.objects.aggregate(count=Count("id"), newest=Max("updated_at"), top=Max("id"))
    newest = found["newest"].isoformat() if found["newest"] else "-"
    return f"{found['count']} {newest} {found['top'] or 0}"


def throttle_rules_check() -> bool:
    """Reload the mirror if the rules changed in the database without being published. At most one process of the
    fleet asks the database per TRAWL_THROTTLE_RULES_TTL (±50 %, so that processes started together spread out);
    the others get False at the cost of one SET."""
    client, buckets = get_redis(), throttle_buckets()
    period = settings.TRAWL_THROTTLE_RULES_TTL * random.uniform(0.5, 1.5)  # jitter, not a secret
    if not client.set(f"{buckets.prefix}:{hash_tag('rules')}:checked", "1", nx=True, px=max(1, int(period * 1000))):
        return False
    if client.exists(buckets.rules_loaded_key) and client.get(_signature_key(buckets)) == throttle_rules_signature():
        return False
    return throttle_rules_load()


def _signature_key(buckets: TokenBuckets) -> str:
    return f"{buckets.prefix}:{hash_tag('rules')}:signature"


def throttle_rules_load() -> bool:
    """Mirror every rule into Redis and mark the mirror loaded (no expiry: see throttle_rules_check).

    Called by a worker whose bucket script found no fresh mirror. Only one process loads at a time; the others get
    False and ask the script again shortly. The rules are written first (each in its domain's slot), then the index
    and the freshness marker, only if no rule was published meanwhile (the version did not move): else we read the
    database and write everything again.
    """
    client, buckets = get_redis(), throttle_buckets()
    lock = f"{buckets.prefix}:loading"
    if not client.set(lock, "1", nx=True, ex=_LOAD_LOCK_SECONDS):
        return False
    try:
        while True:
            version, signature = client.get(buckets.version_key), throttle_rules_signature()
            rules = {row.domain: throttle_limits(row) for row in DomainThrottle.objects.iterator(chunk_size=2000)}
            # In chunks and by SSCAN: with 100,000 rules no single command may hold Redis for long (bench/domains.py).
            gone = [name for name in client.sscan_iter(buckets.rules_index_key, count=1000) if name not in rules]
            fresh_index = f"{buckets.rules_index_key}:loading"
            client.delete(fresh_index)
            names = list(rules)
            for start in range(0, max(len(names), len(gone)), _LOAD_CHUNK):
                with client.pipeline(transaction=False) as pipe:
                    for domain in gone[start : start + _LOAD_CHUNK]:
                        pipe.delete(buckets.rule_key(domain))
                    for domain in names[start : start + _LOAD_CHUNK]:
                        pipe.set(buckets.rule_key(domain), rules[domain].as_redis())
                    if names[start : start + _LOAD_CHUNK]:
                        pipe.sadd(fresh_index, *names[start : start + _LOAD_CHUNK])
                    pipe.execute()
            with client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(buckets.version_key)
                    if pipe.get(buckets.version_key) != version:
                        continue
                    pipe.multi()
                    pipe.unlink(buckets.rules_index_key)  # the old index is freed in the background
                    if rules:
                        # Both keys share the {rules} slot; redis-py's cluster pipeline refuses its rename() method
                        # whatever the keys, but runs the command itself.
                        pipe.execute_command("RENAME", fresh_index, buckets.rules_index_key)
                    pipe.set(buckets.rules_loaded_key, "1")
                    # Forgotten after a while, so that a change no version shows (a queryset update() leaves
                    # updated_at) is mirrored by a full reload then: reloads no longer hold any take back.
                    pipe.set(
                        _signature_key(buckets), signature, ex=_FULL_RELOAD_PERIODS * settings.TRAWL_THROTTLE_RULES_TTL
                    )
                    pipe.execute()
                    logger.info("throttle rules loaded into redis count=%d", len(rules))
                    return True
                except redis.WatchError:
                    continue
    finally:
        client.delete(lock)
