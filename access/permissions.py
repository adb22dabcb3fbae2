from __future__ import annotations

from rest_framework.permissions import BasePermission

from access.models import Requester


class IsRequester(BasePermission):
    message = "Send `Authorization: Token <token>` (or `Bearer <token>`); `manage.py issue_token` makes one."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, Requester)


class IsAdminRequester(BasePermission):
    message = "This endpoint needs an admin token (`manage.py issue_token <name> --admin`)."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, Requester) and request.user.is_admin
