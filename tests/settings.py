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

from project.settings import *  # noqa: F403

# Tests log in often; hashing speed is not what they test.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The API reads JSON only (415 otherwise): a test client's dict body goes as JSON unless a test says multipart.
REST_FRAMEWORK = {**REST_FRAMEWORK, "TEST_REQUEST_DEFAULT_FORMAT": "json"}  # noqa: F405
