"""Automatic rollback: a canary or beta that fails far more often than stable loses its traffic.

Checked after every job of a version with traffic ends (a follow-up of the end: `crawls.services.after_end`). The
version is judged on the jobs that ended since its current rollout began (`rollout_started_at`), once there are at
least TRAWL_ROLLBACK_MIN_JOBS of them; stable on its jobs over the same span (or, if it ran none, its last
max(TRAWL_ROLLBACK_MIN_JOBS, candidate jobs)). Both knobs may be overridden per scraper in its settings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.cache import registry_changed
from registry.hooks import job_facts
from registry.models import ScraperVersion, Variant
from registry.outcomes import VersionOutcome
from registry.selectors import stable_reference

logger = logging.getLogger("trawl.registry")

ROLLED_BACK_EVENT = "scraper.rolled_back"


@dataclass(frozen=True)
class Policy:
    min_jobs: int
    threshold: float  # failure-rate margin over stable, 0..1 (0.2 = 20 percentage points)

    @classmethod
    def for_scraper(cls, scraper_settings: dict[str, Any]) -> Policy:
        return cls(
            min_jobs=max(1, int(scraper_settings.get("TRAWL_ROLLBACK_MIN_JOBS", settings.TRAWL_ROLLBACK_MIN_JOBS))),
            threshold=float(scraper_settings.get("TRAWL_ROLLBACK_THRESHOLD", settings.TRAWL_ROLLBACK_THRESHOLD)),
        )


@dataclass(frozen=True)
class RollbackVerdict:
    candidate: VersionOutcome
    stable: ScraperVersion | None
    baseline: VersionOutcome
    policy: Policy

    @property
    def margin(self) -> float:
        return (self.candidate.failure_rate or 0.0) - (self.baseline.failure_rate or 0.0)

    @property
    def roll_back(self) -> bool:
        return self.candidate.jobs >= self.policy.min_jobs and self.margin > self.policy.threshold

    @property
    def reason(self) -> str:
        if self.stable is None:
            baseline = "no stable version to compare (taken as 0%)"
        elif not self.baseline.jobs:
            baseline = f"stable {self.stable.version} with no jobs to compare (taken as 0%)"
        else:
            baseline = (
                f"{self.baseline.failure_rate:.0%} for stable {self.stable.version} "
                f"({self.baseline.failed} of {self.baseline.jobs})"
            )
        return (
            f"failed {self.candidate.failed} of {self.candidate.jobs} jobs ({self.candidate.failure_rate:.0%}) vs "
            f"{baseline}; allowed margin {self.policy.threshold:.0%}"
        )


def version_judge(*, version: ScraperVersion) -> RollbackVerdict:
    """How a version's current rollout compares with stable. Read-only."""
    policy = Policy.for_scraper(version.scraper.settings or {})
    since = version.rollout_started_at or version.created_at
    stable = stable_reference(scraper=version.scraper)
    candidate = job_facts().failure_counts(version=version, since=since)
    baseline = VersionOutcome()
    if stable is not None and stable.pk != version.pk:
        baseline = job_facts().failure_counts(version=stable, since=since)
        if not baseline.jobs:
            # Stable ran nothing meanwhile (all traffic on the candidate?): its recent record, as many jobs as either.
            baseline = job_facts().failure_counts(version=stable, last=max(policy.min_jobs, candidate.jobs))
    return RollbackVerdict(candidate=candidate, stable=stable, baseline=baseline, policy=policy)


def version_rollback_check(*, version_id: int | None) -> ScraperVersion | None:
    """After a job ended: roll its version back if it is a canary/beta failing too often. Never raises."""
    if not version_id or not settings.TRAWL_ROLLBACK_ENABLED:
        return None
    try:
        version = ScraperVersion.objects.select_related("scraper").filter(pk=version_id).first()
        if version is None or version.variant == Variant.STABLE or not version.traffic_pct or not version.is_active:
            return None
        verdict = version_judge(version=version)
        return version_rollback(version=version, verdict=verdict) if verdict.roll_back else None
    except Exception:
        # robust: the job that triggered the check has already ended; its outcome must stand whatever happens here.
        logger.exception("rollback check of version %s failed", version_id)
        return None


@transaction.atomic
def version_rollback(*, version: ScraperVersion, verdict: RollbackVerdict) -> ScraperVersion | None:
    """Cut the version's traffic to 0 and record why. None if it had no traffic left (another worker was first)."""
    now = timezone.now()
    before = version.traffic_pct
    cut = ScraperVersion.objects.filter(pk=version.pk, traffic_pct__gt=0, deprecated_at__isnull=True).update(
        traffic_pct=0, rolled_back_at=now, rollback_reason=verdict.reason
    )
    if not cut:
        return None
    registry_changed()  # update() sends no post_save
    version.refresh_from_db()
    logger.warning("rolled back %s from %s%% traffic: %s", version, before, verdict.reason)
    transaction.on_commit(
        lambda: rolled_back_notify(version=version, verdict=verdict, traffic_before=before), robust=True
    )
    return version


def rolled_back_notify(*, version: ScraperVersion, verdict: RollbackVerdict, traffic_before: int) -> None:
    """POST `scraper.rolled_back` to TRAWL_ROLLBACK_WEBHOOK_URL, signed with the secret of the requester named by
    TRAWL_ROLLBACK_WEBHOOK_REQUESTER, through the callbacks app (retries, delivery log)."""
    url = settings.TRAWL_ROLLBACK_WEBHOOK_URL
    if not url:
        return
    from access.models import Requester
    from callbacks.services import event_emit

    signer = settings.TRAWL_ROLLBACK_WEBHOOK_REQUESTER
    requester = Requester.objects.filter(name=signer).first() if signer else None
    if requester is None:
        logger.warning(
            "scraper.rolled_back sent unsigned: TRAWL_ROLLBACK_WEBHOOK_REQUESTER %r names no requester", signer
        )
    event_emit(
        event=ROLLED_BACK_EVENT,
        dedupe_key=f"rollback:{version.pk}:{version.rolled_back_at:%Y%m%dT%H%M%S.%f}",
        target_url=url,
        data=rolled_back_data(version=version, verdict=verdict, traffic_before=traffic_before),
        requester_id=requester.pk if requester else None,
    )


def rolled_back_data(*, version: ScraperVersion, verdict: RollbackVerdict, traffic_before: int) -> dict[str, Any]:
    return {
        "scraper": version.scraper.name,
        "version": version.version,
        "variant": version.variant,
        "traffic_pct_before": traffic_before,
        "rolled_back_at": version.rolled_back_at.isoformat(),
        "reason": version.rollback_reason,
        "jobs": verdict.candidate.jobs,
        "failed": verdict.candidate.failed,
        "failure_rate": verdict.candidate.failure_rate,
        "stable": {
            "version": verdict.stable.version if verdict.stable else None,
            "jobs": verdict.baseline.jobs,
            "failed": verdict.baseline.failed,
            "failure_rate": verdict.baseline.failure_rate,
        },
        "min_jobs": verdict.policy.min_jobs,
        "threshold": verdict.policy.threshold,
    }
