"""Queue depths per priority step, read from the broker in use, and their samples over time.

On Redis, kombu's transport keeps one list per (queue, priority step): the queue's own name for step 0 and
`<queue><sep><step>` for the others (`crawls`, `crawls:1`, ... `crawls:9` here). Messages a worker has taken but not
acknowledged yet (running crawls, with acks_late) sit in the `unacked` hash until they end.

On RabbitMQ (CELERY_BROKER_URL `amqp://...`) a passive queue declaration answers the number of ready messages; AMQP
tells neither the depth per priority nor the unacknowledged count (the management API does), so `steps` is empty and
`unacked` is None there.
"""

from __future__ import annotations

import functools
import json
import time

import redis
from django.conf import settings

from project.celery import app
from project.messaging.brokers import AMQP, broker_transport
from project.redis import get_redis, stats_key


def broker_queues() -> list[str]:
    return [queue.name for queue in app.conf.task_queues or ()]


def queue_keys(queue: str) -> dict[int, str]:
    """Redis list of each priority step of `queue`, as kombu names them."""
    options = app.conf.broker_transport_options or {}
    steps = options.get("priority_steps") or [0, 3, 6, 9]
    sep = options.get("sep", "\x06\x16")
    prefix = options.get("global_keyprefix", "")
    return {step: f"{prefix}{queue}{sep}{step}" if step else f"{prefix}{queue}" for step in steps}


@functools.cache
def _broker_redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, decode_responses=True)


def broker_redis() -> redis.Redis:
    """A client of the broker's Redis (only when the broker is Redis)."""
    return _broker_redis(app.conf.broker_url)


def queue_depths() -> dict:
    """{"queues": {queue: {"total": n, "steps": {"0": n, ...}}}, "unacked": n}, asked of the broker in use."""
    if broker_transport(app.conf.broker_url) == AMQP:
        return amqp_queue_depths()
    return redis_queue_depths()


def amqp_queue_depths() -> dict:
    """Ready messages per queue from RabbitMQ, one passive declaration each (a queue nobody declared yet is empty)."""
    result = {}
    with app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=1, timeout=5)
        channel = connection.channel()
        try:
            for queue in broker_queues():
                try:
                    _, count, _ = channel.queue_declare(queue=queue, passive=True)
                except connection.channel_errors:  # 404: not declared yet; the error closed the channel
                    count = 0
                    channel = connection.channel()
                result[queue] = {"total": count, "steps": {}}
        finally:
            channel.close()
    return {"queues": result, "unacked": None}


def redis_queue_depths() -> dict:
    """The Redis transport's lists and unacked hash, in one round trip."""
    queues = broker_queues()
    plan = [(queue, step, key) for queue in queues for step, key in queue_keys(queue).items()]
    options = app.conf.broker_transport_options or {}
    pipe = broker_redis().pipeline(transaction=False)
    for _, _, key in plan:
        pipe.llen(key)
    pipe.hlen(options.get("global_keyprefix", "") + options.get("unacked_key", "unacked"))
    *lengths, unacked = pipe.execute()
    result = {queue: {"total": 0, "steps": {}} for queue in queues}
    for (queue, step, _), length in zip(plan, lengths, strict=True):
        result[queue]["steps"][str(step)] = length
        result[queue]["total"] += length
    return {"queues": result, "unacked": unacked}


def _samples_key() -> str:
    return stats_key("queue_samples")


def queue_sample_store(*, now: float | None = None) -> dict:
    """Take one sample of the queue depths and keep it (newest first, capped) for the dashboard's chart."""
    sample = {"t": round(time.time() if now is None else now, 3), **queue_depths()}
    pipe = get_redis().pipeline(transaction=False)
    pipe.lpush(_samples_key(), json.dumps(sample))
    pipe.ltrim(_samples_key(), 0, settings.TRAWL_STATS_QUEUE_SAMPLES_KEPT - 1)
    pipe.execute()
    return sample


def queue_samples(*, limit: int = 120) -> list[dict]:
    """The last `limit` samples, oldest first."""
    return [json.loads(raw) for raw in reversed(get_redis().lrange(_samples_key(), 0, limit - 1))]
