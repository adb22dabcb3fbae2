from __future__ import annotations

import base64
import binascii

from rest_framework import authentication, exceptions

from access.models import Requester
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


def basic_requester(authorization: str) -> Requester | None:
    """The requester named in an `Authorization: Basic` header's user, when its password is one of that requester's
    live API tokens (how scrapyd's clients authenticate: scrapy.cfg's `username` and `password`)."""
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, token = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    requester = token_authenticate(token=token) if token else None
    return requester if requester is not None and requester.name == user else None


class RequesterBasicAuthentication(authentication.BaseAuthentication):
    """`Authorization: Basic <name:token>`, where scrapyd's tools follow Trawl's URLs with the credentials they hold
    (the `log_url` and `items_url` of scrapyd/'s listjobs.json): the requester, as with its token."""

    def authenticate(self, request):
        authorization = authentication.get_authorization_header(request).decode(errors="replace")
        if authorization.partition(" ")[0].lower() != "basic":
            return None
        requester = basic_requester(authorization)
        if requester is None:
            raise exceptions.AuthenticationFailed("Basic credentials must be a requester's name and its API token.")
        return requester, None


# Where scrapyd's tools are sent (a job's log and items): the token, or their basic credentials.
TOKEN_OR_BASIC = [RequesterTokenAuthentication, RequesterBasicAuthentication]
