"""The bucket script against real Redis: upper bounds on what it grants, whoever asks and however they interleave."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from email.utils import formatdate

import pytest
from django.conf import settings

from crawls.services.jobs import job_create
from project.errors import TrawlError
from project.redis import get_redis, redis_client, redis_key
from tests.throttling.hammer import hammer, hammer_init
from throttling.buckets import (
    BLOCKED,
    GRANTED,
    STALE,
    WAIT,
    Limits,
    TokenBuckets,
    retry_after_seconds,
)
from throttling.models import DomainThrottle
from throttling.services import (
    domain_normalize,
    throttle_buckets,
    throttle_create,
    throttle_delete,
    throttle_rules_load,
    throttle_update,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]

TEST_PREFIX = "trawl:test-throttle"


def flush_throttle_keys() -> None:
    client = get_redis()
    for pattern in (redis_key("throttle", "*"), f"{TEST_PREFIX}:*"):
        keys = list(client.scan_iter(pattern, count=1000))
        if keys:
            client.delete(*keys)


@pytest.fixture
def publish(django_capture_on_commit_callbacks):
    """Run a service and the Redis publication it queues for after the commit."""

    def run(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return run


def bench_buckets(**rule) -> TokenBuckets:
    """Buckets under a prefix of their own, with one rule for example.test, mirrored as the services would."""
    buckets = TokenBuckets(defaults=Limits(rate=1, burst=1, ip_rate=1, ip_burst=1), prefix=TEST_PREFIX)
    client = get_redis()
    client.set(buckets.rule_key("example.test"), Limits(**rule).as_redis())
    client.set(buckets.rules_loaded_key, "1", ex=600)
    return buckets


def take_all(buckets: TokenBuckets, *, host: str, egress: str, seconds: float) -> list[float]:
    """Ask as fast as one client can for `seconds`; return when each grant was answered."""
    client, grants = get_redis(), []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        if buckets.take(client, host=host, egress=egress).status == GRANTED:
            grants.append(time.monotonic())
    return grants


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    most, first = 0, 0
    for last, moment in enumerate(times):
        while moment - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


# --- the bucket maths --------------------------------------------------------------------------


def test_several_processes_never_get_more_than_burst_plus_rate_times_elapsed():
    rate, burst = 20.0, 5
    bench_buckets(rate=rate, burst=burst, ip_rate=1000, ip_burst=1000)
    args = [(settings.REDIS_URL, TEST_PREFIX, "example.test", "default", 2.5)] * 4

    context = multiprocessing.get_context("spawn")
    with context.Pool(4, initializer=hammer_init, initargs=(context.Barrier(4),)) as pool:
        per_process = pool.starmap(hammer, args)

    grants = [grant for grants in per_process for grant in grants]
    assert all(per_process), "every process should have been granted something"
    # Every grant happened inside [first ask, last answer]; the bucket allows burst + rate × that span at most.
    span = max(answered for _, answered in grants) - min(asked for asked, _ in grants)
    assert len(grants) <= burst + rate * span
    # Any one second: a grant answered in [t, t+1] was decided in [t - slowest reply, t+1].
    slowest = max(answered - asked for asked, answered in grants)
    assert most_in_any_window([answered for _, answered in grants], 1.0) <= burst + rate * (1.0 + slowest)


def test_the_egress_ip_bucket_limits_each_ip_on_its_own():
    buckets = bench_buckets(rate=1000, burst=1000, ip_rate=2, ip_burst=2)
    client = get_redis()

    started = time.monotonic()
    first = take_all(buckets, host="example.test", egress="10.0.0.1", seconds=1.0)
    elapsed = time.monotonic() - started
    other_ip = buckets.take(client, host="example.test", egress="10.0.0.2")

    assert len(first) <= 2 + 2 * elapsed  # the IP bucket's burst + rate × elapsed, though the domain allows 1000/s
    assert other_ip.status == GRANTED, "another egress IP has a full bucket of its own"


def test_the_domain_bucket_limits_all_egress_ips_together():
    buckets = bench_buckets(rate=3, burst=3, ip_rate=1000, ip_burst=1000)
    client, grants = get_redis(), 0
    stop_at = time.monotonic() + 1.0
    started = time.monotonic()
    while time.monotonic() < stop_at:
        for egress in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            grants += buckets.take(client, host="example.test", egress=egress).status == GRANTED
    elapsed = time.monotonic() - started

    assert grants <= 3 + 3 * elapsed


def test_a_refused_take_says_how_long_to_wait_and_takes_nothing():
    buckets = bench_buckets(rate=0.5, burst=1, ip_rate=1000, ip_burst=1000)
    client = get_redis()

    granted = buckets.take(client, host="example.test", egress="a")
    refused = [buckets.take(client, host="example.test", egress="a") for _ in range(3)]

    assert granted.status == GRANTED
    assert {decision.status for decision in refused} == {WAIT}
    assert all(1.5 < decision.wait <= 2.0 for decision in refused)  # one token at 0.5/s, nothing consumed meanwhile


def test_a_rate_of_zero_grants_the_burst_and_then_nothing():
    buckets = bench_buckets(rate=0, burst=2, ip_rate=1000, ip_burst=1000)

    decisions = [buckets.take(get_redis(), host="example.test", egress="a").status for _ in range(5)]

    assert decisions == [GRANTED, GRANTED, WAIT, WAIT, WAIT]


def test_scale_multiplies_both_rates():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1, scale=0.1)
    client = get_redis()

    buckets.take(client, host="example.test", egress="a")
    refused = buckets.take(client, host="example.test", egress="a")

    assert refused.status == WAIT and refused.wait > 0.5  # one token per second, not ten


def test_a_missing_script_is_loaded_again():
    buckets = bench_buckets(rate=10, burst=10, ip_rate=10, ip_burst=10)
    buckets.script.sha = "0" * 40  # what a Redis restart or SCRIPT FLUSH looks like to us

    decision = buckets.take(get_redis(), host="example.test", egress="a")

    assert decision.status == GRANTED
    assert buckets.script.sha != "0" * 40


def test_a_missing_script_is_loaded_again_by_an_asyncio_client():
    buckets = bench_buckets(rate=10, burst=10, ip_rate=10, ip_burst=10)
    buckets.script.sha = "0" * 40

    async def take():
        client = redis_client(asyncio=True)
        try:
            return await buckets.take_async(client, host="example.test", egress="a")
        finally:
            await client.aclose()

    decision = asyncio.run(take())

    assert decision.status == GRANTED
    assert buckets.script.sha != "0" * 40


def test_time_comes_from_redis_not_from_the_caller():
    buckets = bench_buckets(rate=1, burst=1, ip_rate=1, ip_burst=1)
    buckets.take(get_redis(), host="example.test", egress="a")

    stored = float(get_redis().get(buckets.bucket_key("example.test")).split()[1])

    seconds, micros = get_redis().time()
    assert abs(stored - (seconds + micros / 1e6)) < 5


# --- rules: which applies, live changes, blocked domains -------------------------------------------


def test_an_exact_host_rule_beats_its_domains_rule(publish):
    publish(throttle_create, domain="example.com", rate=1, burst=1, blocked=True)
    publish(throttle_create, domain="api.example.com", rate=1, burst=1)
    buckets, client = throttle_buckets(), get_redis()
    throttle_rules_load()

    assert buckets.take(client, host="api.example.com", egress="a").rule == "host"
    assert buckets.take(client, host="api.example.com", egress="a").status == WAIT
    assert buckets.take(client, host="www.example.com", egress="a").status == BLOCKED
    assert buckets.take(client, host="elsewhere.org", egress="a").rule == "default"


def test_a_rate_change_applies_to_the_very_next_request(publish):
    throttle = publish(throttle_create, domain="example.com", rate=0, burst=1, ip_rate=100, ip_burst=100)
    buckets, client = throttle_buckets(), get_redis()
    throttle_rules_load()
    assert buckets.take(client, host="example.com", egress="a").status == GRANTED
    assert buckets.take(client, host="example.com", egress="a").status == WAIT

    publish(throttle_update, throttle=throttle, rate=1000, burst=3)
    time.sleep(0.01)  # a few tokens' worth at the new rate
    after_raise = [buckets.take(client, host="example.com", egress="a").status for _ in range(2)]
    publish(throttle_update, throttle=throttle, scale=0.0)
    drained = take_all(buckets, host="example.com", egress="a", seconds=0.2)
    publish(throttle_update, throttle=throttle, blocked=True)

    assert after_raise == [GRANTED, GRANTED]
    assert len(drained) <= 3, "with scale 0 nothing refills: at most the burst left"
    assert buckets.take(client, host="example.com", egress="a").status == BLOCKED


def test_deleting_a_rule_falls_back_to_the_defaults(publish):
    throttle = publish(throttle_create, domain="example.com", blocked=True)
    buckets, client = throttle_buckets(), get_redis()
    throttle_rules_load()

    publish(throttle_delete, throttle=throttle)

    assert buckets.take(client, host="example.com", egress="a").rule == "default"


def test_rules_are_loaded_from_the_database_when_redis_has_none():
    DomainThrottle.objects.create(domain="example.com", blocked=True)  # behind the services' back
    buckets, client = throttle_buckets(), get_redis()

    before = buckets.take(client, host="example.com", egress="a")
    loaded = throttle_rules_load()

    assert before.status == STALE
    assert loaded
    assert buckets.take(client, host="example.com", egress="a").status == BLOCKED
    assert 0 < client.ttl(buckets.rules_loaded_key) <= settings.TRAWL_THROTTLE_RULES_TTL


def test_a_reload_drops_rules_deleted_behind_the_services_back(publish):
    publish(throttle_create, domain="example.com", blocked=True)
    throttle_rules_load()
    DomainThrottle.objects.all().delete()

    throttle_rules_load()

    assert throttle_buckets().take(get_redis(), host="example.com", egress="a").rule == "default"


def test_only_one_process_loads_the_rules_at_a_time():
    get_redis().set(f"{throttle_buckets().prefix}:loading", "1", ex=30)

    assert throttle_rules_load() is False


def test_a_job_for_a_blocked_domain_is_refused(publish, builtins):
    publish(throttle_create, domain="example.com", blocked=True)
    publish(throttle_create, domain="ok.example.com")

    with pytest.raises(TrawlError) as refused:
        job_create(url="https://shop.example.com/list")

    assert refused.value.field == "url"
    assert "blocked" in refused.value.message
    assert job_create(url="https://ok.example.com/").pk  # its own rule, not blocked


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Example.COM.", "example.com"), ("bücher.de", "xn--bcher-kva.de"), ("127.0.0.1", "127.0.0.1")],
)
def test_domains_are_stored_normalized(value, expected):
    assert domain_normalize(value) == expected


@pytest.mark.parametrize("value", ["http://example.com/", "example.com/path", "*.example.com", "", "a..b", "-a.com"])
def test_things_that_are_not_host_names_are_refused(value):
    with pytest.raises(TrawlError) as refused:
        domain_normalize(value)
    assert refused.value.field == "domain"


def test_a_rule_mirrored_without_its_newer_fields_takes_the_defaults_concurrency_and_adaptive():
    """A rule written before `adaptive` and `concurrency` existed ("rate burst ip_rate ip_burst scale blocked")."""
    buckets = bench_buckets(rate=1000, burst=1000, ip_rate=1000, ip_burst=1000)
    buckets.defaults = Limits(rate=1, burst=1, ip_rate=1, ip_burst=1, concurrency=2)
    client = get_redis()
    client.set(buckets.rule_key("example.test"), "1000.0 1000 1000.0 1000 1.0 0")
    client.delete(buckets.slots_key("example.test"))
    first = buckets.take(client, host="example.test", egress="a", tokens=5, holder="old")
    assert (first.status, first.granted, first.rule) == (GRANTED, 2, "host")  # the rule's rate, the defaults' slots
    assert buckets.take(client, host="example.test", egress="a", holder="other").busy
    client.delete(buckets.slots_key("example.test"))


# --- Retry-After -------------------------------------------------------------------------------


def test_a_pause_is_seen_by_every_other_client(publish):
    publish(throttle_create, domain="example.com", rate=100, burst=100, ip_rate=100, ip_burst=100)
    throttle_rules_load()
    other_client = redis_client()

    throttle_buckets().pause(get_redis(), host="www.example.com", seconds=30)
    seen = [throttle_buckets().take(other_client, host="example.com", egress=egress) for egress in ("a", "b")]

    assert [decision.status for decision in seen] == [WAIT, WAIT]
    assert all(29 < decision.wait <= 30.1 for decision in seen)


def test_a_shorter_pause_never_shortens_a_longer_one():
    buckets = bench_buckets(rate=100, burst=100, ip_rate=100, ip_burst=100)
    client = get_redis()

    buckets.pause(client, host="example.test", seconds=30)
    left = buckets.pause(client, host="example.test", seconds=1)

    assert left > 29


def test_retry_after_is_read_as_seconds_or_as_a_date():
    now = time.time()

    assert retry_after_seconds(b"120", now=now) == 120
    assert 59 <= retry_after_seconds(formatdate(now + 60, usegmt=True), now=now) <= 61
    assert retry_after_seconds(formatdate(now - 60, usegmt=True), now=now) == 0
    assert retry_after_seconds(b"soon", now=now) is None
    assert retry_after_seconds(None, now=now) is None
