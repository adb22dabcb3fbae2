"""Per-requester API rate limits (DRF throttling): TRAWL_API_RATE for requesters, TRAWL_API_ADMIN_RATE for admins.

Counted in Trawl's Redis, not in Django's cache: every gunicorn worker and every web host shares one count per
requester, and one INCR per request counts atomically (DRF's SimpleRateThrottle reads a history from the cache and
writes it back, so concurrent requests in different workers overwrite each other's and slip through). A fixed window
per requester: at most N requests in each period; past it a 429 whose Retry-After says when the window ends. All of
a requester's tokens share its count, so issuing more tokens does not raise its rate.
"""

from __future__ import annotations

import logging
import math
import time

import redis
from django.conf import settings
from rest_framework.throttling import BaseThrottle

from access.models import Requester
from access.rates import rate_parse
from project.redis import get_redis, hash_tag, redis_key

logger = logging.getLogger("trawl.api")


class RequesterRateThrottle(BaseThrottle):
    """At most TRAWL_API_RATE requests per requester (TRAWL_API_ADMIN_RATE for admins); read at each request, so a
    changed setting applies at once. Requests without a requester (a 401 on its way) are not counted here."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request, view) -> bool:
        requester = request.user
        if not isinstance(requester, Requester):
            return True
        limit = rate_parse(settings.TRAWL_API_ADMIN_RATE if requester.is_admin else settings.TRAWL_API_RATE)
        if limit is None:
            return True
        count, period = limit
        now = time.time()
        window = int(now // period)
        key = redis_key("api-rate", hash_tag(requester.pk), period, window)
        try:
            with get_redis().pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.expire(key, period + 1)
                used, _ = pipe.execute()
        except redis.RedisError as exc:
            # Open, not shut: while Trawl's Redis is away the endpoints that need only the database keep answering
            # (README), and nothing a requester does can take Redis away.
            logger.warning("API rate limit not counted, Trawl's Redis is away: %s", exc)
            return True
        if used <= count:
            return True
        self.retry_after = (window + 1) * period - now
        return False

    def wait(self) -> float | None:
        return None if self.retry_after is None else max(1, math.ceil(self.retry_after))
