"""project.messages.send: given a producer, a plain task signature goes the direct way (the message built once and
handed to kombu, as a dispatch pass publishes thousands); what reaches kombu is what Celery's own apply_async sends."""

from __future__ import annotations

from celery import current_app, signature
from celery.result import denied_join_result

from project import messages


def published_by(send_one) -> list[tuple[tuple, dict]]:
    """Each `producer.publish` call (the task message, then its task-sent event) made by `send_one(producer)`, with
    what differs between any two sends (ids, timestamps, the sent event's clock) taken out. Published for real."""
    calls = []
    with denied_join_result(), current_app.producer_or_acquire() as producer:
        real = producer.publish

        def record(body, **kwargs):
            calls.append((body, kwargs))
            return real(body, **kwargs)

        producer.publish = record
        try:
            send_one(producer)
        finally:
            producer.publish = real
            with current_app.connection_for_write() as conn:
                conn.default_channel.queue_purge("probe")
    for body, kwargs in calls:
        kwargs.pop("correlation_id", None)
        for key in ("id", "root_id", "parent_id"):
            kwargs.get("headers", {}).pop(key, None)
        if isinstance(body, dict):  # the task-sent event
            for key in ("uuid", "root_id", "timestamp", "utcoffset", "pid", "clock", "local_received"):
                body.pop(key, None)
    return calls


def test_a_signature_sent_through_a_producer_reaches_kombu_as_apply_async_sends_it(redis_server):
    work = signature(
        "tests.probe",
        args=["job-1", 2],
        kwargs={"url": "http://shop.test/"},
        priority=3,
        soft_time_limit=60,
        time_limit=90,
        argsrepr="['job-1', 2]",
        queue="probe",
    )
    celery_way = published_by(lambda producer: work.apply_async(producer=producer))
    direct = published_by(lambda producer: messages.send(work, producer=producer))

    assert len(direct) == 2, "the message, then the task-sent event Flower lists queued tasks by"
    assert direct == celery_way
    body, sent = direct[0]
    assert (list(body[0]), sent["priority"], sent["routing_key"]) == (["job-1", 2], 3, "probe")
    assert list(sent["headers"]["timelimit"]) == [90, 60] and sent["headers"]["argsrepr"] == "['job-1', 2]"
