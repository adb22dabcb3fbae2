"""IPv6 forms of private IPv4 addresses (NAT64, local-use NAT64, 6to4, Teredo, IPv4-mapped, IPv4-compatible) are
private: refused at submission with a 400 naming the field, and as links at fetch time, end to end with a real
worker. The IPv4-mapped form is a real path to 127.0.0.1 on this machine (a dual-stack socket), which the
`make run` settings (guard off by design) show by reaching the private listener through it."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import wait_final
from tests.security.nameserver import Listener

pytestmark = pytest.mark.django_db(transaction=True)

# Each names 127.0.0.1 (the private network) through a translation or an IPv6 form.
PRIVATE_FORMS = {
    "nat64": "64:ff9b::7f00:1",
    "nat64-local": "64:ff9b:1::7f00:1",
    "6to4": "2002:7f00:1::1",
    "teredo": "2001:0:5db8:d822::80ff:fffe",  # client 127.0.0.1 (obfuscated), server 93.184.216.34
    "mapped": "::ffff:127.0.0.1",
    "compatible": "::127.0.0.1",
}


def links_page(port: int, forms: dict[str, str]) -> str:
    anchors = "".join(f'<a href="http://[{address}]:{port}/{name}">{name}</a>' for name, address in forms.items())
    return f"<html><title>attacker</title>{anchors}</html>"


def crawl_links(api, port: int, forms: dict[str, str], worker) -> CrawlJob:
    with Listener(ATTACKER_HOST, pages={"/": links_page(port, forms)}) as attacker:
        options = {"maxdepth": 1, "allowed_domains": [ATTACKER_HOST, *forms.values()]}
        spec = {"url": f"http://{ATTACKER_HOST}:{attacker.port}/", "options": options}
        response = api.post("/api/jobs/", spec, format="json")
        assert response.status_code == 201, response.content
        return wait_final(response.json()["id"], worker, timeout=120)


def test_translated_private_addresses_are_refused_at_submission_and_as_links(mode, api, builtins, mode_worker):
    with Listener("127.0.0.1") as private:
        if mode == "production":
            for name, address in PRIVATE_FORMS.items():
                url = f"http://[{address}]:{private.port}/{name}"
                as_url = api.post("/api/jobs/", {"url": url}, format="json")
                as_callback = api.post("/api/jobs/", {"url": f"http://{ATTACKER_HOST}/", "callback_url": url})
                assert as_url.status_code == 400 and "private" in as_url.json()["url"][0], (name, as_url.content)
                assert as_callback.status_code == 400 and "callback_url" in as_callback.json(), name
            assert CrawlJob.objects.count() == 0
            job = crawl_links(api, private.port, PRIVATE_FORMS, mode_worker)
        else:
            # Only the form that connects here: the others have no route and would wait out download timeouts.
            job = crawl_links(api, private.port, {"mapped": PRIVATE_FORMS["mapped"]}, mode_worker)

    print(f"\n[{mode}] refused_private={job.stats.get('refused_private', 0)}; private saw {private.paths()}")
    assert job.status == "succeeded", (job.error_class, job.error_message)
    if mode == "production":
        assert private.hits == []
        assert job.stats["refused_private"] >= len(PRIVATE_FORMS)  # every link (robots.txt requests too)
    else:
        assert "/mapped" in private.paths()  # the guard is off in `make run`: the path the guard closes is real
