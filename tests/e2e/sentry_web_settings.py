"""Settings of the web the Sentry test starts (tests/e2e/test_sentry_e2e.py): the project's, with one more route
(tests/e2e/sentry_web_urls.py)."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "tests.e2e.sentry_web_urls"
