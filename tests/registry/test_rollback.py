"""Automatic rollback: a canary or beta failing far more often than stable loses its traffic, and says why."""

from __future__ import annotations

import json
from datetime import timedelta
from http.server import BaseHTTPRequestHandler

import pytest
from django.utils import timezone

from access.services import token_issue
from callbacks.models import Delivery
from callbacks.signing import signature_verify
from crawls.models import CrawlJob, JobStatus
from crawls.services.lifecycle import job_end
from registry.models import ScraperVersion
from registry.services import traffic_set, version_create, version_rollback, version_rollback_check, version_route
from tests.registry.factories import LINK_SPIDER, make_job, make_scraper
from tests.sites import ServedSite

pytestmark = pytest.mark.django_db

FAILED, SUCCEEDED = JobStatus.FAILED, JobStatus.SUCCEEDED


@pytest.fixture(autouse=True)
def policy(settings):
    settings.TRAWL_ROLLBACK_ENABLED = True
    settings.TRAWL_ROLLBACK_MIN_JOBS = 10
    settings.TRAWL_ROLLBACK_THRESHOLD = 0.2
    settings.TRAWL_ROLLBACK_WEBHOOK_URL = ""
    return settings


@pytest.fixture
def shop():
    return make_scraper("shop")


@pytest.fixture
def stable(shop):
    return version_create(scraper=shop, version="1.0.0", spider=LINK_SPIDER, is_default=True, traffic_pct=90)


@pytest.fixture
def canary(shop, stable):
    canary = version_create(scraper=shop, version="1.1.0", spider=LINK_SPIDER, variant="canary", traffic_pct=10)
    for n in range(20):
        make_job(stable, status=FAILED if n == 0 else SUCCEEDED)  # stable during the rollout: 5% failures
    return canary


def run(version, outcomes):
    """Jobs of `version` ending one by one, each followed by the check job_finish makes."""
    result = None
    for status in outcomes:
        make_job(version, status=status)
        result = version_rollback_check(version_id=version.pk) or result
    return result


def test_a_canary_failing_far_more_than_stable_is_rolled_back_once_it_ran_enough_jobs(shop, stable, canary):
    assert run(canary, [FAILED] * 9) is None, "9 jobs are fewer than TRAWL_ROLLBACK_MIN_JOBS"
    rolled = run(canary, [FAILED])

    canary.refresh_from_db()
    assert rolled is not None
    assert canary.traffic_pct == 0
    assert canary.rolled_back_at is not None and canary.state == "rolled back"
    assert "failed 10 of 10 jobs (100%)" in canary.rollback_reason
    assert "5% for stable 1.0.0 (1 of 20)" in canary.rollback_reason
    assert {version_route(scraper=shop).version for _ in range(500)} == {"1.0.0"}
    assert ScraperVersion.objects.get(pk=stable.pk).traffic_pct == 90, "stable keeps its share"


def test_the_job_end_follow_up_rolls_back(shop, stable, canary, django_capture_on_commit_callbacks):
    run(canary, [FAILED] * 9)
    job = CrawlJob.objects.create(
        url="http://shop.test/", scraper=shop, version=canary, status=JobStatus.RUNNING, started_at=timezone.now()
    )

    with django_capture_on_commit_callbacks(execute=True):
        job_end(job=job, error_class="parse", message="no price")

    assert ScraperVersion.objects.get(pk=canary.pk).traffic_pct == 0


def test_a_canary_within_the_margin_keeps_its_traffic(stable, canary):
    # One failure in five against stable's one in twenty: 15 points, under the 20-point threshold.
    assert run(canary, [SUCCEEDED, SUCCEEDED, SUCCEEDED, SUCCEEDED, FAILED] * 4) is None
    assert ScraperVersion.objects.get(pk=canary.pk).traffic_pct == 10


def test_a_beta_is_judged_like_a_canary(shop, stable):
    beta = version_create(scraper=shop, version="2.0.0-beta.1", spider=LINK_SPIDER, variant="beta", traffic_pct=5)

    assert run(beta, [FAILED] * 10) is not None


def test_stable_is_never_rolled_back(shop):
    stable = version_create(scraper=shop, version="1.0.0", spider=LINK_SPIDER, is_default=True, traffic_pct=100)

    assert run(stable, [FAILED] * 30) is None
    assert ScraperVersion.objects.get(pk=stable.pk).traffic_pct == 100


def test_cancelled_jobs_are_not_the_versions_fault(stable, canary):
    assert run(canary, [JobStatus.CANCELLED] * 10 + [FAILED] * 9) is None


def test_dead_jobs_count_as_failures(stable, canary):
    assert run(canary, [JobStatus.DEAD] * 10) is not None


def test_only_jobs_of_the_current_rollout_count(shop, stable, canary):
    run(canary, [FAILED] * 10)
    traffic_set(scraper=shop, allocation={"1.0.0": 90, "1.1.0": 10})  # operator tries again after a fix

    canary.refresh_from_db()
    assert (canary.traffic_pct, canary.rolled_back_at, canary.rollback_reason) == (10, None, "")
    assert run(canary, [SUCCEEDED] * 9 + [FAILED]) is None, "the 10 failures of the last rollout are history"


def test_stable_without_jobs_in_the_rollout_is_judged_on_its_last_jobs(shop):
    stable = version_create(scraper=shop, version="1.0.0", spider=LINK_SPIDER, is_default=True)
    for n in range(10):
        make_job(stable, status=FAILED if n % 2 else SUCCEEDED, ended_ago=timedelta(hours=2))  # 50%, before
    canary = version_create(scraper=shop, version="1.1.0", spider=LINK_SPIDER, variant="canary", traffic_pct=50)

    # 60% against stable's recent 50%: within the margin.
    assert run(canary, [FAILED] * 6 + [SUCCEEDED] * 4) is None


def test_a_scraper_may_set_its_own_policy(shop, stable, canary):
    shop.settings = {"TRAWL_ROLLBACK_MIN_JOBS": 3, "TRAWL_ROLLBACK_THRESHOLD": 0.5}
    shop.save()

    assert run(canary, [FAILED] * 3) is not None


def test_disabled_means_never(policy, stable, canary):
    policy.TRAWL_ROLLBACK_ENABLED = False

    assert run(canary, [FAILED] * 20) is None


def test_a_version_is_rolled_back_once_even_when_two_workers_decide_together(stable, canary):
    run(canary, [FAILED] * 9)
    make_job(canary, status=FAILED)
    from registry.services import version_judge

    verdict = version_judge(version=canary)
    first = version_rollback(version=ScraperVersion.objects.get(pk=canary.pk), verdict=verdict)
    second = version_rollback(version=ScraperVersion.objects.get(pk=canary.pk), verdict=verdict)

    assert first is not None and second is None


def test_no_webhook_unless_configured(stable, canary, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run(canary, [FAILED] * 10)

    assert not Delivery.objects.exists()


def test_rollback_sends_a_signed_scraper_rolled_back_webhook(
    policy, stable, canary, django_capture_on_commit_callbacks, monkeypatch
):
    from callbacks import services as callbacks

    published = []
    monkeypatch.setattr("project.messaging.messages.send", lambda work, **options: published.append(work))
    ops, _ = token_issue(requester_name="ops", admin=True)
    with Receiver() as receiver:
        policy.TRAWL_ROLLBACK_WEBHOOK_URL = f"{receiver.url}/rollbacks"
        policy.TRAWL_ROLLBACK_WEBHOOK_REQUESTER = "ops"
        with django_capture_on_commit_callbacks(execute=True):
            run(canary, [FAILED] * 10)
        delivery = Delivery.objects.get()
        outcome = callbacks.delivery_attempt(delivery_id=delivery.pk)

    assert (delivery.event, delivery.target_url) == ("scraper.rolled_back", f"{receiver.url}/rollbacks")
    assert [(work.task, tuple(work.args)) for work in published] == [("callbacks.tasks.deliver", (str(delivery.pk),))]
    assert outcome.status == "delivered"
    headers, body = receiver.received[0]
    assert headers["X-Trawl-Event"] == "scraper.rolled_back"
    assert signature_verify(secret=ops.webhook_secret, body=body, header=headers["X-Trawl-Signature"])
    event = json.loads(body)
    assert event["event"] == "scraper.rolled_back"
    assert event["data"]["scraper"] == "shop" and event["data"]["version"] == "1.1.0"
    assert event["data"]["traffic_pct_before"] == 10
    assert (event["data"]["jobs"], event["data"]["failed"], event["data"]["failure_rate"]) == (10, 10, 1.0)
    assert event["data"]["stable"] == {"version": "1.0.0", "jobs": 20, "failed": 1, "failure_rate": 0.05}
    assert event["data"]["reason"] == ScraperVersion.objects.get(pk=canary.pk).rollback_reason


class Receiver(ServedSite):
    """A webhook endpoint on 127.0.0.1 that records (headers, body) of every POST and answers 200."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append((dict(self.headers), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(Handler)
