"""Job priority 1..100 onto the broker's priority steps, so urgent jobs overtake a backlog."""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.conf import settings
from kombu import Connection, Exchange, Queue

import celeryconfig
from crawls.scheduling import BROKER_PRIORITY_STEPS, broker_priority


def test_most_urgent_job_gets_the_most_urgent_broker_step():
    assert broker_priority(100) == 0


def test_least_urgent_job_gets_the_least_urgent_broker_step():
    assert broker_priority(1) == BROKER_PRIORITY_STEPS - 1 == 9


def test_default_priority_lands_on_the_default_broker_step():
    assert broker_priority(50) == celeryconfig.task_default_priority


def test_higher_priority_never_maps_to_a_less_urgent_step():
    steps = [broker_priority(p) for p in range(1, 101)]

    assert all(later <= earlier for earlier, later in itertools.pairwise(steps))
    assert set(steps) == set(range(BROKER_PRIORITY_STEPS)), "every broker step should be reachable"


@pytest.mark.parametrize(("priority", "step"), [(0, 9), (-20, 9), (101, 0), (10_000, 0)])
def test_out_of_range_priorities_are_clamped(priority, step):
    assert broker_priority(priority) == step


def test_steps_match_the_broker_configuration():
    assert celeryconfig.broker_transport_options["priority_steps"] == list(range(BROKER_PRIORITY_STEPS))


def test_urgent_message_overtakes_a_queued_backlog_on_redis(redis_server):
    name = f"test-priority-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    with Connection(settings.REDIS_URL, transport_options=celeryconfig.broker_transport_options) as conn:
        bound = queue(conn.default_channel)
        bound.declare()
        try:
            producer = conn.Producer(serializer="json")
            for n in range(5):
                producer.publish({"job": f"backlog-{n}"}, exchange=bound.exchange, routing_key=name, priority=9)
            producer.publish({"job": "urgent"}, exchange=bound.exchange, routing_key=name, priority=broker_priority(95))

            first = bound.get(no_ack=True)

            assert first.payload == {"job": "urgent"}
        finally:
            bound.purge()
            bound.delete()
