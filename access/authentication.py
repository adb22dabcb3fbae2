from __future__ import annotations

from rest_framework import authentication, exceptions

from access.services import token_authenticate

# `Bearer` too: what Prometheus, OAuth-minded HTTP clients and /metrics send; the token is the same either way.
SCHEMES = ("token", "bearer")


class RequesterTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <token>` or `Authorization: Bearer <token>` → the requester that owns the token."""

    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in SCHEMES:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be `Token <token>` or `Bearer <token>`.")
        requester = token_authenticate(token=header[1].decode(errors="replace"))
        if requester is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return requester, header[1]

    def authenticate_header(self, request) -> str:
        return self.keyword
