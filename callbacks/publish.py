"""The callbacks app's one message: deliver a webhook (sent by name through project.messaging.messages)."""

from __future__ import annotations

from celery import signature

from project.messaging import messages

DELIVER = "callbacks.tasks.deliver"


def publish_delivery(*, delivery_id: object, countdown: float | None = None) -> None:
    messages.send(signature(DELIVER, args=(str(delivery_id),)), countdown=countdown)
