"""The broker apart from Trawl's state: which transport a URL names, priorities the right way round on each, the
queues RabbitMQ orders by priority, and /healthz checking a broker that is not REDIS_URL."""

from __future__ import annotations

import pytest
from kombu import Connection

import celeryconfig
from project.celery import app
from project.messaging.brokers import broker_transport, step_broker_priority
from project.messaging.messages import broker_priority, priority_step

REDIS = "redis://127.0.0.1:6379/0"
AMQP = "amqp://guest:guest@127.0.0.1:5672/trawl"


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        (REDIS, "redis"),
        ("rediss://h:6380/1", "redis"),
        (AMQP, "amqp"),
        ("amqps://u:p@h/v", "amqp"),
        ("pyamqp://h//", "amqp"),
    ],
)
def test_the_transport_is_kombus_for_the_url(url, transport):
    assert broker_transport(url) == transport


def test_steps_are_0_most_urgent_and_each_broker_gets_them_its_way_round():
    assert [priority_step(p) for p in (100, 50, 1)] == [0, 5, 9]
    assert [step_broker_priority(step, url=REDIS) for step in (0, 5, 9)] == [0, 5, 9]  # Redis serves 0 first
    assert [step_broker_priority(step, url=AMQP) for step in (0, 5, 9)] == [9, 4, 0]  # RabbitMQ serves 9 first


def test_publish_maps_a_jobs_priority_for_the_broker_in_use(monkeypatch):
    assert [broker_priority(p) for p in (100, 1)] == [0, 9]  # the session's broker is Redis
    monkeypatch.setenv("CELERY_BROKER_URL", AMQP)  # Celery reads it before its own setting
    assert app.conf.broker_url == AMQP
    assert [broker_priority(p) for p in (100, 1)] == [9, 0]
    # Higher Trawl priority never maps to a less urgent broker priority.
    mapped = [broker_priority(p) for p in range(1, 101)]
    assert mapped == sorted(mapped)


def test_every_queue_is_declared_with_x_max_priority_for_rabbitmq():
    for queue in celeryconfig.task_queues:
        assert queue.max_priority == 9, queue.name  # kombu declares it as x-max-priority (on AMQP only)


def test_unset_the_broker_and_result_store_are_redis_url():
    from project import env

    assert celeryconfig.broker_url == env.CELERY_BROKER_URL == env.REDIS_URL
    assert celeryconfig.result_backend == env.CELERY_RESULT_BACKEND == env.REDIS_URL
    assert (
        celeryconfig.task_default_priority == 5 and Connection(celeryconfig.broker_url).transport.driver_type == "redis"
    )


@pytest.mark.django_db
def test_healthz_says_a_broker_apart_from_redis_is_down(client, redis_server, monkeypatch):
    assert "broker" not in client.get("/healthz").json()  # the broker is REDIS_URL: its check is "redis"
    monkeypatch.setenv("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:1/none")  # nothing listens on port 1

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["broker"] == "down" and response.json()["redis"] == "ok"
