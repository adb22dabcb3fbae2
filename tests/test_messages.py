"""project.messaging.messages.send: given a producer, a plain task signature goes the direct way (the message built once
and handed to kombu, as a dispatch pass publishes thousands); what reaches kombu is what Celery's own apply_async
sends."""

from __future__ import annotations

from celery import current_app, signature
from celery.result import denied_join_result

from project.messaging import messages


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


# Names each task had before it was named after its module; sent still by beat rows and messages queued before.
OLD_TASK_NAMES = {
    "crawls.tasks.dispatch_due_sources": "sources.tasks.dispatch_due_sources",
    "registry.tasks.build_package": "crawls.tasks.build_package",
}
SAME_OPTIONS = ("acks_late", "reject_on_worker_lost", "expires", "priority", "queue", "soft_time_limit", "time_limit")


def trawl_tasks() -> dict:
    current_app.loader.import_default_modules()
    return {name: task for name, task in current_app.tasks.items() if not name.startswith(("celery.", "tests."))}


def test_every_task_is_named_after_the_module_that_defines_it():
    misnamed = {
        name: task.__module__
        for name, task in trawl_tasks().items()
        if not name.startswith(f"{task.__module__}.") and name not in OLD_TASK_NAMES
    }
    assert misnamed == {}
    assert messages.TASK_ALIASES == OLD_TASK_NAMES


def test_a_message_sent_under_a_task_s_old_name_runs_the_same_function_routed_and_limited_alike():
    tasks = trawl_tasks()
    router = current_app.amqp.router
    for old, new in OLD_TASK_NAMES.items():
        alias, task = tasks[old], tasks[new]
        assert alias.run is task.run
        assert [getattr(alias, option, None) for option in SAME_OPTIONS] == [
            getattr(task, option, None) for option in SAME_OPTIONS
        ]
        assert router.route({}, old) == router.route({}, new)
