"""The bucket script's rules against real Redis: which rule applies, live changes, blocked domains, rules loaded from
the database, domain names normalized."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from crawls.services.jobs import job_create
from project.errors import TrawlError
from project.redis import get_redis
from tests.throttling import buckets_helpers
from tests.throttling.buckets_helpers import bench_buckets, take_all
from throttling.buckets import BLOCKED, GRANTED, STALE, WAIT, Limits
from throttling.models import DomainThrottle
from throttling.services import (
    domain_normalize,
    throttle_buckets,
    throttle_create,
    throttle_delete,
    throttle_rules_check,
    throttle_rules_load,
    throttle_update,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]
publish = buckets_helpers.publish  # a fixture


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
    assert client.ttl(buckets.rules_loaded_key) == -1, "the mirror does not expire: it reloads when rules change"


def test_a_rule_changed_behind_the_services_back_is_found_by_one_check_per_period(publish):
    throttle = publish(throttle_create, domain="example.com", rate=5)
    buckets, client = throttle_buckets(), get_redis()
    throttle_rules_load()
    assert throttle_rules_check() is False, "nothing changed: the database was asked, nothing reloaded"
    DomainThrottle.objects.filter(pk=throttle.pk).update(blocked=True, updated_at=timezone.now())

    assert throttle_rules_check() is False, "another process checked within the period: this one only asks Redis"
    client.delete(f"{buckets.prefix}:{{rules}}:checked")  # the period (jittered) is over
    assert buckets.take(client, host="example.com", egress="a").status == GRANTED, "no take waits for the check"
    assert throttle_rules_check() is True
    assert buckets.take(client, host="example.com", egress="a").status == BLOCKED


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
