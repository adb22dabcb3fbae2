"""Emitting webhook events and delivering them: signed POSTs, retried with backoff and jitter, then `dead`.

Delivery is at least once: a POST that reached the receiver but whose outcome was never recorded (worker killed
mid-request) is sent again with the same `X-Trawl-Delivery`, which is how receivers deduplicate.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from callbacks.models import RETRYABLE_STATUSES, Delivery, DeliveryAttempt, DeliveryStatus
from callbacks.payloads import envelope
from callbacks.publish import publish_delivery
from callbacks.transport import PostResult, post_signed

logger = logging.getLogger("trawl.callbacks")

# A message may run a little before its due time (clock skew between hosts); earlier than this it is a duplicate.
EARLY_TOLERANCE = timedelta(seconds=1)
# Resolving the receiver's name comes before the POST's deadline (TRAWL_DNS_SERVERS: 5 s per record type).
RESOLVE_ALLOWANCE_SECONDS = 15
# What an attempt's log row says until its outcome is written over it: what stays if its worker died mid-POST.
UNFINISHED = "no outcome recorded: the worker stopped during the attempt"


@dataclass(frozen=True)
class AttemptOutcome:
    status: str  # delivered | failed | dead | skipped
    retry_in: float | None = None  # seconds until the next attempt, when one is due


def backoff_seconds(
    attempt: int, *, base: float, cap: float, rng: Callable[[float, float], float] = random.uniform
) -> float:
    """The wait after `attempt` failed tries: base·2^(attempt-1) capped at `cap`, its upper half jittered.

    Half jitter keeps the exponential growth (a receiver that is down gets ever fewer requests) while spreading the
    retries of many events that failed together, so they do not all hit the receiver in the same second.
    """
    ceiling = min(cap, base * 2 ** max(attempt - 1, 0))
    return ceiling / 2 + rng(0, ceiling / 2)


@transaction.atomic
def event_emit(
    *,
    event: str,
    dedupe_key: str,
    target_url: str,
    data: dict,
    requester_id: int | None = None,
    job_id: object | None = None,
    batch_id: object | None = None,
) -> Delivery | None:
    """Store an event once per dedupe key and publish its delivery after commit. None if it already existed."""
    now = timezone.now()
    event_id = uuid.uuid4()
    delivery = Delivery(
        id=event_id,
        event=event,
        dedupe_key=dedupe_key,
        requester_id=requester_id,
        job_id=job_id,
        batch_id=batch_id,
        target_url=target_url,
        payload=envelope(event_id=event_id, event=event, created_at=now, data=data),
        max_attempts=settings.TRAWL_WEBHOOK_MAX_ATTEMPTS,
        next_attempt_at=now,
    )
    try:
        with transaction.atomic():
            delivery.save(force_insert=True)
    except IntegrityError:
        logger.info("event %s already emitted; not emitting it again", dedupe_key)
        return None
    # robust: a broker hiccup must not undo the event; the sweeper publishes what was not published.
    transaction.on_commit(lambda: publish_delivery(delivery_id=delivery.pk), robust=True)
    logger.info("event %s %s for %s queued to %s", event, event_id, dedupe_key, target_url)
    return delivery


def delivery_attempt(*, delivery_id: object) -> AttemptOutcome:
    """Make the next attempt of a delivery, if it is due, within its budget and no one else is making it; record
    what happened. The attempt's row is written as it is claimed, so even an attempt whose worker died mid-POST is
    in the log, and `max_attempts` is final: no claim is made past it."""
    now = timezone.now()
    delivery = Delivery.objects.select_related("requester").filter(pk=delivery_id).first()
    if (
        delivery is None
        or delivery.status not in RETRYABLE_STATUSES
        or delivery.next_attempt_at > now + EARLY_TOLERANCE
    ):
        return AttemptOutcome("skipped")
    if delivery.attempts >= delivery.max_attempts:
        return _spent(delivery)
    number = delivery.attempts + 1
    # Claim attempt `number` (compare-and-set) and lease it, so a duplicate message or the sweeper cannot send it too.
    lease = now + timedelta(seconds=delivery_lease_seconds())
    claimed = Delivery.objects.filter(
        pk=delivery.pk, attempts=delivery.attempts, attempts__lt=F("max_attempts"), status__in=RETRYABLE_STATUSES
    )
    if not claimed.update(attempts=number, next_attempt_at=lease):
        return AttemptOutcome("skipped")
    attempt = DeliveryAttempt.objects.create(
        delivery=delivery, number=number, started_at=now, duration_ms=0, error=UNFINISHED, ok=False
    )
    result = _post(delivery, number)
    DeliveryAttempt.objects.filter(pk=attempt.pk).update(
        duration_ms=result.duration_ms, status_code=result.status_code, error=result.error, ok=result.ok
    )
    return _record(delivery, number, result)


def delivery_lease_seconds() -> float:
    """How long a claimed attempt is its claimer's: the task's time limits (callbacks.tasks) and a margin."""
    return settings.TRAWL_WEBHOOK_DEADLINE_SECONDS + RESOLVE_ALLOWANCE_SECONDS + 60


def _post(delivery: Delivery, number: int) -> PostResult:
    started = time.monotonic()
    try:
        return post_signed(
            url=delivery.target_url,
            payload=delivery.payload,
            headers={
                "X-Trawl-Event": delivery.event,
                "X-Trawl-Delivery": str(delivery.pk),
                "X-Trawl-Attempt": str(number),
            },
            secret=delivery.requester.webhook_secret if delivery.requester else "",
            timeout=settings.TRAWL_WEBHOOK_TIMEOUT_SECONDS,
        )
    except SoftTimeLimitExceeded:
        # An Exception subclass raised wherever the POST was (the name's resolution, most likely): the attempt is
        # failed and recorded, never left claimed and unlogged for the sweeper to send again without end.
        error = "SoftTimeLimitExceeded: the attempt ran past its task's time limit"
    except Exception as exc:  # a fault of ours, not the receiver's: still a failed attempt, logged and retried
        logger.exception("delivery %s attempt %s raised", delivery.pk, number)
        error = f"{type(exc).__name__}: {exc}"
    return PostResult(status_code=None, error=error, duration_ms=int((time.monotonic() - started) * 1000))


def _spent(delivery: Delivery) -> AttemptOutcome:
    """A delivery whose every attempt was claimed but whose last outcome was never recorded (its worker died): dead."""
    Delivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts, status__in=RETRYABLE_STATUSES).update(
        status=DeliveryStatus.DEAD, last_error=delivery.last_error or UNFINISHED
    )
    logger.warning("delivery %s %s dead: its %s attempts are spent", delivery.event, delivery.pk, delivery.attempts)
    return AttemptOutcome("dead")


def _record(delivery: Delivery, number: int, result) -> AttemptOutcome:
    fields = {"last_status_code": result.status_code, "last_error": result.error}
    row = Delivery.objects.filter(pk=delivery.pk, attempts=number)
    if result.ok:
        row.update(status=DeliveryStatus.DELIVERED, delivered_at=timezone.now(), **fields)
        logger.info("delivery %s %s delivered on attempt %s", delivery.event, delivery.pk, number)
        return AttemptOutcome("delivered")
    if number >= delivery.max_attempts:
        row.update(status=DeliveryStatus.DEAD, **fields)
        logger.warning("delivery %s %s dead after %s attempts: %s", delivery.event, delivery.pk, number, result.error)
        return AttemptOutcome("dead")
    wait = backoff_seconds(
        number, base=settings.TRAWL_WEBHOOK_BACKOFF_SECONDS, cap=settings.TRAWL_WEBHOOK_BACKOFF_MAX_SECONDS
    )
    row.update(status=DeliveryStatus.FAILED, next_attempt_at=timezone.now() + timedelta(seconds=wait), **fields)
    logger.info("delivery %s attempt %s failed (%s); next in %.1fs", delivery.pk, number, result.error, wait)
    return AttemptOutcome("failed", retry_in=wait)


def delivery_redeliver(*, delivery: Delivery) -> None:
    """Operator's "deliver again": same event id, a fresh budget of attempts, due now."""
    Delivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.PENDING,
        next_attempt_at=timezone.now(),
        max_attempts=F("attempts") + settings.TRAWL_WEBHOOK_MAX_ATTEMPTS,
    )
    transaction.on_commit(lambda: publish_delivery(delivery_id=delivery.pk), robust=True)


def deliveries_sweep(*, limit: int = 500) -> int:
    """Publish again deliveries overdue by more than the grace: their message was lost or their worker died."""
    cutoff = timezone.now() - timedelta(seconds=settings.TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS)
    overdue = Delivery.objects.filter(status__in=RETRYABLE_STATUSES, next_attempt_at__lt=cutoff)
    ids = list(overdue.order_by("next_attempt_at").values_list("id", flat=True)[:limit])
    for delivery_id in ids:
        publish_delivery(delivery_id=delivery_id)
    if ids:
        logger.warning("sweeper published %s overdue deliveries again", len(ids))
    return len(ids)
