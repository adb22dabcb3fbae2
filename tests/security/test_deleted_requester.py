"""A deleted requester's queued jobs must not run (issue 41). A job keeps its requester as a nullable key: once the
requester was deleted, its queued job ran as nobody's, which Trawl treats as the system tenant's: no cap and no
private-target guard. Under the production settings an ordinary requester queues a crawl of its "public" site
(127.0.0.2, allow-listed) whose page links into the private network (127.0.0.1); an admin then deletes the requester,
and a real worker starts. The job must end `cancelled` naming why, and nothing private may be fetched.
"""

from __future__ import annotations

import pytest

from access.models import Requester
from crawls.models import CrawlJob
from tests.callbacks.harness import FAST_ENV, exclusive, running_alone
from tests.clients import client_for
from tests.security.conftest import ATTACKER_HOST, MODES
from tests.security.hostile_site import wait_final
from tests.security.nameserver import PRIVATE_HOST, Listener
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def production_web(settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    settings.TRAWL_PRIVATE_TARGETS_ALLOWED = [f"{ATTACKER_HOST}/32"]
    return settings


def test_a_deleted_requesters_queued_job_never_runs(builtins, production_web, redis_server, tmp_path):
    with Listener(PRIVATE_HOST, pages={"/secret": "<html><title>internal</title></html>"}) as private:
        secret = f"http://{PRIVATE_HOST}:{private.port}/secret"
        pages = {"/": f'<html><title>lure</title><a href="{secret}">in</a></html>', "/other": "<html>ok</html>"}
        with Listener(ATTACKER_HOST, pages=pages) as public:
            site = f"http://{ATTACKER_HOST}:{public.port}"
            options = {"maxdepth": 1, "allowed_domains": [ATTACKER_HOST, PRIVATE_HOST]}
            env = {**MODES["production"], **FAST_ENV}
            worker = Worker(queues="crawls,control,callbacks", env=env, log_dir=tmp_path)
            with exclusive(worker):  # nothing consumes crawls until the requester is gone
                ghost = client_for("ghost").post("/api/jobs/", {"url": f"{site}/", "options": options})
                assert ghost.status_code == 201, ghost.content
                Requester.objects.get(name="ghost").delete()
                with running_alone(worker):
                    canary = client_for("bystander").post("/api/jobs/", {"url": f"{site}/other"})
                    assert canary.status_code == 201, canary.content
                    assert wait_final(canary.json()["id"], worker).status == "succeeded"
                    worker.wait_idle()
            job = CrawlJob.objects.get(pk=ghost.json()["id"])

    assert job.status == "cancelled" and "ghost" in job.error_message and "deleted" in job.error_message, (
        job.status,
        job.error_message,
        worker.log_tail(),
    )
    assert job.started_at is None, "the job never started"
    assert private.hits == [], "a deleted requester's job reached the private network"
    assert "/" not in public.paths(), "a deleted requester's job fetched its start page"
