"""The API's pagination: limit/offset with bounds, so no query parameter can overflow the database's integers."""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10**12  # far past any real table, far below a 64-bit overflow once the limit is added


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """`?limit=` above TRAWL_API_MAX_PAGE_SIZE (200) gets that many rows; `next` pages on."""

    max_limit = settings.TRAWL_API_MAX_PAGE_SIZE

    def get_offset(self, request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
