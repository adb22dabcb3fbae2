from __future__ import annotations

from rest_framework import authentication, exceptions

from access.services import token_authenticate


class RequesterTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <token>` → the requester that owns the token."""

    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() != self.keyword.lower():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be `Token <token>`.")
        requester = token_authenticate(token=header[1].decode(errors="replace"))
        if requester is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return requester, header[1]

    def authenticate_header(self, request) -> str:
        return self.keyword
