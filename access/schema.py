"""Tells drf-spectacular how requesters authenticate, so the OpenAPI document declares `Token` auth."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class RequesterTokenScheme(OpenApiAuthenticationExtension):
    target_class = "access.authentication.RequesterTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <token>` (or `Bearer <token>`), as printed by `manage.py issue_token`.",
        }


class RequesterBasicScheme(OpenApiAuthenticationExtension):
    target_class = "access.authentication.RequesterBasicAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "basic",
            "description": "A requester's name and one of its API tokens, as scrapyd's tools send them (a job's log "
            "and items only).",
        }
