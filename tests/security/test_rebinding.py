"""DNS rebinding against the private-target guard, end to end: a name that answers an allowed address to the first
query and a private one after. The guard's check and the connection must use one resolution, so the private
listener (127.0.0.1) sees nothing and the request reaches the allowed twin (127.0.0.2, same port) it was checked
against. Crawls and webhooks resolve through a real DNS server the test runs (TRAWL_DNS_SERVERS)."""

from __future__ import annotations

import pytest

from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import wait_final
from tests.security.nameserver import (
    PRIVATE_HOST,
    Listener,
    dns_mode_worker,
    nameserver,
    twin_listeners,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dns_mode_worker", "nameserver"]  # fixtures


def test_a_link_whose_name_rebinds_to_a_private_address_never_reaches_it(
    mode, api, builtins, nameserver, dns_mode_worker
):
    nameserver.rebinding("rebind.test", first=ATTACKER_HOST, then=PRIVATE_HOST)
    private, allowed = twin_listeners({"/secret": "<html><title>secret</title></html>"})
    link = f"http://rebind.test:{private.port}/secret"
    page = {"/": f'<html><title>attacker</title><a href="{link}">x</a></html>'}
    with private, allowed, Listener(ATTACKER_HOST, pages=page) as attacker:
        options = {"maxdepth": 1, "allowed_domains": [ATTACKER_HOST, "rebind.test"]}
        response = api.post(
            "/api/jobs/", {"url": f"http://{ATTACKER_HOST}:{attacker.port}/", "options": options}, format="json"
        )
        assert response.status_code == 201, response.content
        job = wait_final(response.json()["id"], dns_mode_worker, timeout=120)

    print(f"\n[{mode}] DNS queries for rebind.test: {nameserver.queries['rebind.test']}; private saw {private.paths()}")
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert nameserver.queries["rebind.test"] >= 1  # the crawl asked the configured server, not the system resolver
    if mode == "production":
        assert private.paths() == [], "a second resolution reached the private listener"
        assert job.stats.get("refused_private", 0) == 0  # the guard's check passed: the connection was the risk
    assert "/secret" in allowed.paths()  # fetched from the address the name answered first


def test_a_webhook_whose_name_rebinds_is_delivered_to_the_checked_address_only(
    mode, api, builtins, nameserver, dns_mode_worker
):
    # Two allowed answers: the submission's check (production) and the delivery's own; every later one is private.
    nameserver.rebinding(
        "hook.test", first=ATTACKER_HOST, then=PRIVATE_HOST, allowed_times=2 if mode == "production" else 1
    )
    private, allowed = twin_listeners()
    with private, allowed, Listener(ATTACKER_HOST, pages={"/": "<html><title>p</title></html>"}) as site:
        spec = {"url": f"http://{ATTACKER_HOST}:{site.port}/", "callback_url": f"http://hook.test:{private.port}/hook"}
        response = api.post("/api/jobs/", spec, format="json")
        assert response.status_code == 201, response.content
        job = wait_final(response.json()["id"], dns_mode_worker, timeout=120)
        wait_for(lambda: allowed.hits, dns_mode_worker, "the webhook's delivery")

    print(f"\n[{mode}] DNS queries for hook.test: {nameserver.queries['hook.test']}; private saw {private.paths()}")
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert [(method, path) for method, path, _ in allowed.hits] == [("POST", "/hook")]
    assert b'"job.completed"' in allowed.hits[0][2]
    assert private.hits == [], "the delivery connected to a second answer"
