"""Errors to Sentry when SENTRY_DSN is set (sentry-sdk's Django and Celery integrations); nothing at all when not.

Every process that loads Django's settings (web, workers, beat, manage.py) calls `sentry_init` once. A crawl's job
id, scraper and version are tags on whatever its task reports (`sentry_job_tags`, in the task's own scope); an API
view's unexpected exception is tagged with its requester's name, view and job (`sentry_request_tags`); and a
job that ends in an error of its code or of Trawl (TRAWL_SENTRY_JOB_ERRORS: a spider's exception, a package that
would not build, a lost worker...) is one event with the job's error, not one per page: Scrapy's per-response
"Spider error processing" records (logged in the reactor's thread, outside the task's scope) are left to the job's
log. A site's failures (DNS, 4xx, blocks) are the site's, not errors of yours: they stay on the job.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("trawl.sentry")

# Records that become events through the job's own report instead (one per job, with its tags).
LEFT_TO_THE_JOB = ("scrapy.core.scraper", "scrapy.core.engine", "trawl.error_pages")


def sentry_init(*, dsn: str, environment: str = "", release: str = "") -> bool:
    """Start reporting to `dsn`; False (and nothing imported or sent) when it is empty."""
    if not dsn:
        return False
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration
    from sentry_sdk.integrations.logging import ignore_logger

    sentry_sdk.init(
        dsn=dsn,
        environment=environment or None,
        release=release or None,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,  # no request bodies, cookies or users: requesters' tokens and pages stay here
        traces_sample_rate=0.0,
    )
    for name in LEFT_TO_THE_JOB:
        ignore_logger(name)
    return True


def sentry_enabled() -> bool:
    try:
        import sentry_sdk
    except ImportError:
        return False
    return sentry_sdk.get_client().is_active()


def sentry_job_tags(*, job_id: Any, scraper: str, version: str = "") -> None:
    """Tag what the current task reports with the job it runs (no-op when Sentry is off)."""
    if not sentry_enabled():
        return
    import sentry_sdk

    sentry_sdk.set_tag("job_id", str(job_id))
    sentry_sdk.set_tag("scraper", scraper)
    if version:
        sentry_sdk.set_tag("version", version)


def sentry_request_tags(*, requester: str, view: str, job_id: str = "") -> None:
    """Tag what the current web request reports (an API view's unexpected exception, project.errors): who asked, by
    name (its token stays out: sentry-sdk's own scrubbing drops the Authorization header and secret-looking
    variables), which view, and which job. No-op when Sentry is off."""
    if not sentry_enabled():
        return
    import sentry_sdk

    sentry_sdk.set_tag("requester", requester or "-")
    if view:
        sentry_sdk.set_tag("view", view)
    if job_id:
        sentry_sdk.set_tag("job_id", job_id)


def sentry_job_failed(*, job_id: Any, scraper: str, version: str, error_class: str, message: str) -> None:
    """One event for a job that ended in an error, tagged with the job, its scraper, version and error class."""
    if not sentry_enabled():
        return
    import sentry_sdk

    with sentry_sdk.new_scope() as scope:
        scope.set_tag("job_id", str(job_id))
        scope.set_tag("scraper", scraper)
        scope.set_tag("version", version or "-")
        scope.set_tag("error_class", error_class)
        scope.fingerprint = ["trawl-job", scraper, version or "-", error_class]
        first_line = (message or "").strip().split("\n", 1)[0][:200]
        scope.set_extra("error", (message or "")[:8000])
        sentry_sdk.capture_message(f"job {error_class}: {scraper} {version or '-'}: {first_line}", level="error")
