"""The API's pagination: limit/offset with bounds, so no query parameter can overflow the database's integers."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10**12  # far past any real table, far below a 64-bit overflow once the limit is added


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 1000

    def get_offset(self, request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
