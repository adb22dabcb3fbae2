"""Which transport carries Celery's messages, and how a Trawl priority step becomes that transport's priority.

Redis (kombu's virtual transport) serves priority 0 first; AMQP (RabbitMQ) serves the highest number first, and
only on queues declared with `x-max-priority`. Trawl thinks in steps (0 = most urgent, see crawls.publish); this
module turns a step into the number the broker in use expects, so nothing else needs to know which broker runs.
"""

from __future__ import annotations

import functools

from kombu import Connection

# A job's, batch's or source's priority: PRIORITY_MIN (least urgent) .. PRIORITY_MAX (most urgent), PRIORITY_DEFAULT
# unless asked. project.messaging.messages maps it onto the broker's PRIORITY_STEPS.
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 1, 100, 50
PRIORITY_STEPS = 10  # steps 0..9; celeryconfig declares the same on both transports
AMQP = "amqp"


@functools.cache
def broker_transport(url: str) -> str:
    """kombu's driver type for `url` ("redis", "amqp", ...): read from the transport class, no connection made."""
    return Connection(url).transport.driver_type


def step_broker_priority(step: int, *, url: str) -> int:
    """The message priority that puts a message on priority step `step` (0 most urgent) of the broker at `url`."""
    step = min(max(int(step), 0), PRIORITY_STEPS - 1)
    return (PRIORITY_STEPS - 1) - step if broker_transport(url) == AMQP else step
