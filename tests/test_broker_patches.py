"""kombu's Redis transport closing a channel after its connection let go of the client: a connection error that
Celery recovers from, not an AttributeError that ends the worker (project/messaging/broker_patches.py)."""

from __future__ import annotations

import pytest
import redis.exceptions
from django.conf import settings
from kombu import Connection
from kombu.common import ignore_errors

import project.celery  # noqa: F401 - applies the patch, as in every worker


def test_a_channel_whose_connection_was_closed_raises_a_connection_error(redis_server):
    connection = Connection(settings.REDIS_URL)
    channel = connection.default_channel
    connection.transport.client = None  # what kombu's Connection._do_close_transport does on a lost broker

    with pytest.raises(redis.exceptions.ConnectionError, match="closed while reconnecting"):
        channel._connparams()
    # The path of the crash: Celery closes the lost connection with ignore_errors, which restores unacked messages.
    channel._pool = None
    ignore_errors(connection, channel.close)


def test_a_live_channel_still_gets_its_parameters(redis_server):
    with Connection(settings.REDIS_URL) as connection:
        params = connection.default_channel._connparams()
    assert params["host"] == "127.0.0.1"
