"""Test settings: the project's settings on a Redis database of their own, with fast heartbeats."""

import os

from tests.parallel import worker_redis_url

# Before project.env is imported: tests must never share queues with a `make run` on the same Redis, nor (under
# pytest-xdist) with each other.
os.environ["REDIS_URL"] = worker_redis_url()
os.environ.setdefault("TRAWL_HEARTBEAT_SECONDS", "1")
# Local test sites have no throttle rule; tests that check politeness configure their own.
os.environ.setdefault("TRAWL_THROTTLE_DEFAULT_RATE", "200")
os.environ.setdefault("TRAWL_THROTTLE_DEFAULT_BURST", "200")
# The suite calls the API thousands of times as a handful of requesters, and Redis keeps their counts between tests
# (a requester's id comes back after a flush): no rate limit unless a test sets one (tests/security/test_front_door).
os.environ.setdefault("TRAWL_API_RATE", "")
os.environ.setdefault("TRAWL_API_ADMIN_RATE", "")
# Tests change what is up and ask /healthz at once; the front-door test sets the cache it checks.
os.environ.setdefault("TRAWL_HEALTHZ_CACHE_SECONDS", "0")

from project.settings import *  # noqa: F403

# Tests log in often; hashing speed is not what they test.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The API reads JSON only (415 otherwise): a test client's dict body goes as JSON unless a test says multipart.
REST_FRAMEWORK = {**REST_FRAMEWORK, "TEST_REQUEST_DEFAULT_FORMAT": "json"}  # noqa: F405
