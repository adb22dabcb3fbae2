"""REST API for throttle rules (admin tokens only). A change applies to running crawls on their next request."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from access.permissions import IsAdminRequester
from project.errors import TrawlError
from project.web.query import QueryChecked, QueryParams
from throttling.models import DomainThrottle
from throttling.selectors import domain_throttles
from throttling.serializers import ThrottleCreateSerializer, ThrottleInputSerializer, ThrottleSerializer
from throttling.services import (
    default_limits,
    throttle_adaptive_states,
    throttle_create,
    throttle_delete,
    throttle_robots_many,
    throttle_update,
)


class ThrottleViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Politeness per domain: `rate`/`burst` for the domain's bucket shared by every worker, `ip_rate`/`ip_burst`
    for each (egress IP, domain) bucket, `scale` (0..1) on both rates, `blocked`, `adaptive` (default true: the
    cluster slows down while the site slows or errors). Rates are requests per second; `effective_rate` is what the
    domain gets now and `adaptive_reason` why. A host's own rule beats its registered domain's; domains without a
    rule get the defaults in settings."""

    permission_classes = [IsAdminRequester]
    serializer_class = ThrottleSerializer
    lookup_field = "domain"
    lookup_value_regex = r"[^/]+"
    query_params = {"list": QueryParams}

    def get_queryset(self):
        return domain_throttles()

    def get_serializer_context(self) -> dict:
        # A page of rules reads the adaptive controller's states in one MGET (paginate_queryset runs first).
        context = super().get_serializer_context()
        return {**context, "states": getattr(self, "_states", {}), "robots": getattr(self, "_robots", {})}

    def list(self, request: Request) -> Response:
        """Every rule with what its domain gets now (`effective_rate`, `adaptive_reason`)."""
        page = self.paginate_queryset(self.get_queryset())
        rows = list(page if page is not None else self.get_queryset())
        self._states = throttle_adaptive_states([row.domain for row in rows])
        self._robots = throttle_robots_many(rows)
        data = self.get_serializer(rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def get_object(self) -> DomainThrottle:
        return get_object_or_404(domain_throttles(), domain=self.kwargs["domain"].lower().rstrip("."))

    @extend_schema(request=ThrottleCreateSerializer, responses={201: ThrottleSerializer})
    def create(self, request: Request) -> Response:
        """Add a rule. Fields left out take the defaults unknown domains get."""
        spec = ThrottleCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        throttle = throttle_create(**spec.validated_data)
        return Response(ThrottleSerializer(throttle).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ThrottleInputSerializer, responses=ThrottleSerializer)
    def update(self, request: Request, domain: str) -> Response:
        """Replace a rule: fields left out go back to the defaults. A different `domain` in the body renames it."""
        throttle = self.get_object()
        spec = ThrottleInputSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        fields = {**asdict(default_limits()), "blocked": False, "note": "", **spec.validated_data}
        return Response(ThrottleSerializer(throttle_update(throttle=throttle, **fields)).data)

    @extend_schema(request=ThrottleInputSerializer, responses=ThrottleSerializer)
    def partial_update(self, request: Request, domain: str) -> Response:
        """Change some fields of a rule, e.g. `{"rate": 0.5}` or `{"blocked": true}`."""
        throttle = self.get_object()
        spec = ThrottleInputSerializer(data=request.data, partial=True)
        spec.is_valid(raise_exception=True)
        if not spec.validated_data:
            raise TrawlError("nothing to change: send at least one field")
        return Response(ThrottleSerializer(throttle_update(throttle=throttle, **spec.validated_data)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, domain: str) -> Response:
        """Remove a rule: the domain gets its registered domain's rule, or the defaults, from its next request."""
        throttle_delete(throttle=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
