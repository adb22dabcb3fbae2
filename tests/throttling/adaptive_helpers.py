"""Helpers of the adaptive politeness tests (tests/throttling/test_adaptive_*.py): the default config, a healthy
window, the throttle's keys flushed around every test, a controller with test knobs."""

from __future__ import annotations

import pytest

from tests.throttling.buckets_helpers import flush_throttle_keys
from throttling.adaptive import AdaptiveConfig, Window
from throttling.buckets import TokenBuckets
from throttling.controller import AdaptiveController

CONFIG = AdaptiveConfig()
HEALTHY = Window(requests=20, errors=0, latency=0.05)


@pytest.fixture(autouse=True)
def clean_keys(db):  # the keys' prefix is the installation's, read from the database on first use
    flush_throttle_keys()
    yield
    flush_throttle_keys()


def controller(buckets: TokenBuckets, **knobs) -> AdaptiveController:
    return AdaptiveController(buckets=buckets, config=AdaptiveConfig(**{"window": 0.0, "min_requests": 5, **knobs}))
