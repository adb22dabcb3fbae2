"""Work-arounds for Celery/kombu reconnection bugs that would otherwise end a worker's main process.

Applied by project.celery as the app is created, in every process that talks to the broker.

kombu's Redis transport, closing a connection that Redis dropped, restores the channel's unacked messages through a
new client built from the connection's parameters — but the connection has already let go of its `client`, so
`Channel._connparams` raises `AttributeError: 'NoneType' object has no attribute 'hostname'`. Celery only tolerates
connection errors there (`kombu.common.ignore_errors`), so the AttributeError escapes and the worker exits with
"Unrecoverable error" (seen here whenever Redis restarts under a running crawl; upstream: celery/kombu#582, the same
trace from `_connparams`, and the family of celery/celery#4652 and celery/kombu#659). Raising Redis's own
ConnectionError instead lets Celery do what it does for any lost broker: close what it can and reconnect. The unacked
messages stay in Redis's unacked index, where the visibility timeout restores them (and the reaper republishes jobs
whose message was lost with an emptied Redis).
"""

from __future__ import annotations

from typing import Any

PATCHED = "_trawl_patched"


def kombu_redis_patch() -> None:
    import redis.exceptions
    from kombu.transport import redis as transport

    channel = transport.Channel
    if getattr(channel._connparams, PATCHED, False):
        return
    original = channel._connparams

    class ClosedWhileReconnecting(redis.exceptions.ConnectionError):
        pass

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        connection = getattr(self, "connection", None)
        if connection is None or connection.client is None:
            raise ClosedWhileReconnecting("the broker connection was closed while reconnecting (celery/kombu#582)")
        return original(self, asynchronous=asynchronous)

    setattr(_connparams, PATCHED, True)
    channel._connparams = _connparams
