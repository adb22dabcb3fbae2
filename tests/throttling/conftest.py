"""Fixtures of the throttle's tests."""

from __future__ import annotations

import pytest

from throttling.models import DomainThrottle
from throttling.services import throttle_create, throttle_rules_load


@pytest.fixture
def rule(django_capture_on_commit_callbacks):
    """`rule(domain, **fields)`: a throttle rule created as the services publish it, and the mirror loaded. Modules
    whose tests need other defaults (test_slots) or one fixed rule (test_bucket_reserve) define their own."""

    def create(domain: str, **fields) -> DomainThrottle:
        with django_capture_on_commit_callbacks(execute=True):
            throttle = throttle_create(domain=domain, **fields)
        throttle_rules_load()
        return throttle

    return create
