"""DNS rebinding against a rendered page (requester job, production guard): the page's script fetches and frames a
name that the crawl's DNS server (TRAWL_DNS_SERVERS) answers with the allow-listed address, while any second
resolution — the system's, which Chromium and Playwright's own fetch use — answers the private one. The name is
`localhost`: the test's DNS server says 127.0.0.2 (allowed), the machine's resolver says 127.0.0.1 (the private
listener), which is exactly a hostile name answering public to the check and private to the connection. The private
listener must see nothing; the request reaches the allowed twin it was checked against (the crawl's proxy,
runtime/rendering/proxy.py, connects to the checked address only). Over https the proxy sees only
`CONNECT host:port`: the same must hold for the tunnel."""

from __future__ import annotations

import pytest

from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import wait_final
from tests.security.nameserver import (
    PRIVATE_HOST,
    Listener,
    dns_mode_worker,
    nameserver,
    self_signed,
    twin_listeners,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["dns_mode_worker", "nameserver"]  # fixtures

REBINDING_NAME = "localhost"  # the system resolver's answer is private whatever the test's DNS server says


@pytest.fixture
def mode() -> str:
    """Production only: under `make run` the guard is off by design (docs/trust.md)."""
    return "production"


def rendered_attack(api, worker, script: str):
    """A requester's rendered job of the attacker's page (on the allowed address) running `script`, once it ended."""
    page = f"<html><head><title>attacker</title></head><body><script>{script}</script></body></html>"
    with Listener(ATTACKER_HOST, pages={"/": page}) as attacker:
        options = {"render": True, "wait_for": "networkidle"}
        url = f"http://{ATTACKER_HOST}:{attacker.port}/"
        response = api.post("/api/jobs/", {"url": url, "options": options}, format="json")
        assert response.status_code == 201, response.content
        return wait_final(response.json()["id"], worker, timeout=180)


def test_a_rendered_pages_request_to_a_rebinding_name_never_reaches_the_private_address(
    api, builtins, nameserver, dns_mode_worker
):
    nameserver.rebinding(REBINDING_NAME, first=ATTACKER_HOST, then=PRIVATE_HOST, allowed_times=10**6)
    private, allowed = twin_listeners({"/secret": "<html><title>secret</title></html>"})
    target = f"http://{REBINDING_NAME}:{private.port}/secret"
    script = f"""
fetch("{target}?fetch", {{mode: "no-cors"}}).catch(() => {{}});
const frame = document.createElement("iframe"); frame.src = "{target}?frame"; document.body.appendChild(frame);
"""
    with private, allowed:
        job = rendered_attack(api, dns_mode_worker, script)

    print(f"\nDNS queries for {REBINDING_NAME}: {nameserver.queries[REBINDING_NAME]}; private saw {private.paths()}")
    print(f"allowed saw {allowed.paths()}; render stats {job.stats.get('render')}")
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert job.stats["render"]["pages"] == 1
    assert private.paths() == [], "a second resolution reached the private listener"
    assert nameserver.queries[REBINDING_NAME] >= 1  # the page's requests were checked against the crawl's DNS
    # Fetched from the address that was checked.
    assert sorted(allowed.paths()) == ["/secret?fetch", "/secret?frame"]


def test_a_rendered_pages_https_request_to_a_rebinding_name_is_tunnelled_to_the_checked_address_only(
    api, builtins, nameserver, dns_mode_worker, tmp_path
):
    """Chromium asks the proxy for `CONNECT localhost:port`; the tunnel must end at the address the crawl's DNS gave.
    The certificate is self-signed, so Chromium gives up after the handshake: which listener saw the handshake's
    server name (SNI) is what tells where the tunnel went."""
    nameserver.rebinding(REBINDING_NAME, first=ATTACKER_HOST, then=PRIVATE_HOST, allowed_times=10**6)
    private, allowed = twin_listeners(tls=self_signed(tmp_path, REBINDING_NAME))
    target = f"https://{REBINDING_NAME}:{private.port}/secret"
    with private, allowed:
        job = rendered_attack(api, dns_mode_worker, f'fetch("{target}?fetch", {{mode: "no-cors"}}).catch(() => {{}});')

    print(f"\nprivate saw handshakes {private.server_names} and {private.paths()}")
    print(f"allowed saw handshakes {allowed.server_names}; render stats {job.stats.get('render')}")
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert job.stats["render"]["pages"] == 1
    assert (private.server_names, private.paths()) == ([], []), "the tunnel reached the private listener"
    assert nameserver.queries[REBINDING_NAME] >= 1
    assert REBINDING_NAME in allowed.server_names  # the tunnel went to the checked address
