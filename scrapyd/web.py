"""What every scrapyd endpoint shares: HTTP basic auth with a requester's name and API token, scrapyd's response
shapes ({"node_name": ..., "status": "ok", ...} / {"status": "error", "message": ...}) and its methods.

Refusals answer 200 with `"status": "error"`, as scrapyd does, so its clients print the message; a missing or wrong
credential answers 401 with a Basic challenge (scrapy.cfg's `username`/`password`, curl's `-u`).
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Callable

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import ValidationError

from access.authentication import basic_requester as requester_of_basic
from access.models import Requester
from project.errors import TrawlError

logger = logging.getLogger("trawl.scrapyd")
NODE_NAME = socket.gethostname()


class ScrapydError(Exception):
    """A request refused with scrapyd's error shape."""


def ok(**fields) -> JsonResponse:
    return JsonResponse({"node_name": NODE_NAME, "status": "ok", **fields})


def error(message: str, *, status: int = 200) -> JsonResponse:
    response = JsonResponse({"node_name": NODE_NAME, "status": "error", "message": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Basic realm="Trawl scrapyd"'
    return response


def basic_requester(request: HttpRequest) -> Requester | None:
    """The requester named in `Authorization: Basic`, when the password is one of its live API tokens."""
    return requester_of_basic(request.META.get("HTTP_AUTHORIZATION", ""))


def required(params, name: str) -> str:
    value = params.get(name, "")
    if not value:
        raise ScrapydError(f"'{name}' parameter is required")
    return value


def message_of(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        detail = exc.detail
        if isinstance(detail, dict):
            return "; ".join(f"{field}: {' '.join(map(str, _flat(msgs)))}" for field, msgs in detail.items())
        return " ".join(map(str, _flat(detail)))
    return getattr(exc, "message", None) or str(exc)


def _flat(value) -> list:
    if isinstance(value, dict):
        return [f"{k}: {' '.join(map(str, _flat(v)))}" for k, v in value.items()]
    if isinstance(value, list):
        return [m for v in value for m in _flat(v)]
    return [value]


def endpoint(*, methods: tuple[str, ...], admin: bool = False) -> Callable:
    """A scrapyd endpoint: the method checked, the requester authenticated (an admin one if `admin`), and Trawl's
    refusals turned into scrapyd's error shape. The view is called as view(request, requester, params, **path) (the
    URL's named parts)."""

    def wrap(view: Callable) -> Callable:
        @csrf_exempt
        @functools.wraps(view)
        def answer(request: HttpRequest, **path) -> JsonResponse:
            if request.method not in methods:
                return error(f"use {' or '.join(methods)} for {request.path.rsplit('/', 1)[-1]}", status=405)
            requester = basic_requester(request)
            if requester is None:
                return error("send HTTP basic auth: a requester's name and one of its API tokens", status=401)
            if admin and not requester.is_admin:
                return error("this needs an admin token (`manage.py issue_token <name> --admin`)", status=403)
            params = request.POST if request.method == "POST" else request.GET
            try:
                return view(request, requester, params, **path)
            except (ScrapydError, TrawlError, ValidationError) as exc:
                return error(message_of(exc))

        return answer

    return wrap
