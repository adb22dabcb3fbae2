"""The operator's allow-list (TRAWL_PRIVATE_TARGETS_ALLOWED=127.0.0.2/32 under the production settings) is honoured
the same way at submission, at fetch time and for webhooks: a job and a callback at 127.0.0.2 are accepted, crawled
and delivered by a real worker; the same at 127.0.0.1 are refused with a 400 naming the field."""

from __future__ import annotations

import pytest

from crawls.models import Batch
from tests.security.hostile_site import wait_final
from tests.security.nameserver import Listener, twin_listeners, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = {"/": "<html><title>inside</title></html>"}


def post_job(api, url: str, callback_url: str):
    return api.post("/api/jobs/", {"url": url, "callback_url": callback_url}, format="json")


def test_the_allow_list_is_honoured_at_submission_at_fetch_and_for_callbacks(mode, api, builtins, mode_worker):
    private, allowed = twin_listeners(PAGE)
    with private, allowed:
        inside, outside = f"http://127.0.0.2:{allowed.port}", f"http://127.0.0.1:{private.port}"
        accepted = post_job(api, f"{inside}/", f"{inside}/hook")
        assert accepted.status_code == 201, accepted.content
        if mode == "production":
            assert_refused_at_submission(api, inside=inside, outside=outside)
        job = wait_final(accepted.json()["id"], mode_worker, timeout=120)
        wait_for(lambda: ("POST", "/hook") in [(m, p) for m, p, _ in allowed.hits], mode_worker, "the delivery")
        if mode == "make_run":  # a single-user development stack: no guard, internal sites are fair game
            local = post_job(api, f"{outside}/", f"{outside}/hook")
            assert local.status_code == 201, local.content
            assert wait_final(local.json()["id"], mode_worker, timeout=120).status == "succeeded"
            wait_for(lambda: "/hook" in private.paths(), mode_worker, "the delivery to 127.0.0.1")

    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert job.stats.get("refused_private", 0) == 0
    assert "/" in allowed.paths()
    if mode == "production":
        assert private.hits == []


def assert_refused_at_submission(api, *, inside: str, outside: str) -> None:
    refused_url = post_job(api, f"{outside}/", f"{inside}/hook")
    refused_callback = post_job(api, f"{inside}/", f"{outside}/hook")
    batch_callback = api.post(
        "/api/batches/", {"callback_url": f"{outside}/hook", "jobs": [{"url": f"{inside}/"}]}, format="json"
    )
    batch_spec = api.post("/api/batches/", {"jobs": [{"url": f"{inside}/"}, {"url": f"{outside}/"}]}, format="json")

    assert refused_url.status_code == 400 and "127.0.0.1" in refused_url.json()["url"][0]
    assert refused_callback.status_code == 400 and "127.0.0.1" in refused_callback.json()["callback_url"][0]
    assert batch_callback.status_code == 400 and "callback_url" in batch_callback.json()
    assert batch_spec.status_code == 400 and "url" in batch_spec.json()["jobs"]["1"]
    assert Batch.objects.count() == 0


def test_every_delivery_attempt_applies_the_allow_list(settings):
    """Whatever submission decided, each delivery attempt judges what it connects to (same rule, same allow-list)."""
    from callbacks.transport import post_signed

    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    settings.TRAWL_PRIVATE_TARGETS_ALLOWED = ["127.0.0.2/32"]
    with Listener("127.0.0.2") as inside, Listener("127.0.0.1") as outside:
        delivered = post_signed(url=f"http://127.0.0.2:{inside.port}/h", payload={}, headers={}, secret="s", timeout=5)
        refused = post_signed(url=f"http://127.0.0.1:{outside.port}/h", payload={}, headers={}, secret="s", timeout=5)

    assert delivered.ok and inside.paths() == ["/h"]
    assert refused.error.startswith("refused:") and outside.hits == []
