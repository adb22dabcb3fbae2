"""Attacks by an ordinary requester, end to end: real worker processes, once with the settings `make run` ships and
once with the production settings (the private-target guard on).

Addresses: an attacker's "public" site listens on 127.0.0.2, which the production workers allow-list
(`TRAWL_PRIVATE_TARGETS_ALLOWED=127.0.0.2/32`, as an operator trusting one internal network would); everything on
127.0.0.1 (the worker's Redis, the database, other local sites) stands for the private network the guard protects.
"""

from __future__ import annotations

import pytest

from tests.workers import Worker

ATTACKER_HOST = "127.0.0.2"
ALLOWED = f"{ATTACKER_HOST}/32"
PRODUCTION_SECRET = "security-tests-" + "s" * 40

# The two ways Trawl is run: what `make run` ships, and the production settings module.
MODES = {
    "make_run": {"DJANGO_SETTINGS_MODULE": "project.settings"},
    "production": {
        "DJANGO_SETTINGS_MODULE": "project.settings_production",
        "SECRET_KEY": PRODUCTION_SECRET,
        "TRAWL_PRIVATE_TARGETS_ALLOWED": ALLOWED,
    },
}


@pytest.fixture(params=sorted(MODES))
def mode(request) -> str:
    return request.param


@pytest.fixture
def mode_web_settings(mode, settings):
    """The web side (the test process answers the API) configured like the workers of `mode`."""
    if mode == "production":
        settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
        settings.TRAWL_PRIVATE_TARGETS_ALLOWED = [ALLOWED]
    return settings


@pytest.fixture
def mode_worker(mode, mode_web_settings, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A real crawl worker running with `mode`'s settings, the only consumer of the queues while the test runs."""
    from tests.callbacks.harness import running_alone

    worker = Worker(queues="crawls,control,callbacks", concurrency=1, env=dict(MODES[mode]), log_dir=tmp_path)
    with running_alone(worker):
        yield worker
