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
