"""REST API for sources (admin tokens only): what beat crawls on its own, and "crawl this one now"."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from access.permissions import IsAdminRequester
from crawls.runs import RunSerializer
from crawls.serializers import JobSerializer
from items.history.volatility import source_volatility, source_volatility_override
from project.errors import TrawlError
from project.web.query import QueryChecked, QueryParams, row_id_field
from sources.models import Source, SourceKind
from sources.selectors import source_runs, sources_listed
from sources.serializers import (
    SourceCreateSerializer,
    SourceInputSerializer,
    SourceSerializer,
    VolatileFieldsSerializer,
    VolatileOverrideSerializer,
)
from sources.services.sources import source_crawl_now, source_create, source_delete, source_update


class SourceFilters(QueryParams):
    kind = serializers.ChoiceField(choices=SourceKind.choices)
    scraper = serializers.CharField(help_text="The scraper's name.")
    enabled = serializers.BooleanField()
    due = serializers.BooleanField(help_text="true: enabled and due now")
    parent = row_id_field(help_text="Sources discovered by this one.")


@extend_schema_view(list=extend_schema(parameters=[SourceFilters]))
class SourceViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Sources beat dispatches on their own rhythm: often when they change, rarely when they do not, later when a
    site blocks us, only inside their crawl window. `next_sync_at` is the next run, `schedule_note` says why."""

    permission_classes = [IsAdminRequester]
    serializer_class = SourceSerializer
    query_params = {"list": SourceFilters, "runs": QueryParams, "volatile_fields": QueryParams}
    http_method_names = ["get", "post", "patch", "put", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Source]:
        if self.action != "list":
            return sources_listed()
        filters = self.filters
        return sources_listed(
            kind=filters.get("kind"),
            scraper_name=filters.get("scraper"),
            parent_id=filters.get("parent"),
            enabled=filters.get("enabled"),
            due=filters.get("due", False),
        )

    @extend_schema(request=SourceCreateSerializer, responses={201: SourceSerializer})
    def create(self, request: Request) -> Response:
        """Add a source. It is due at once unless `next_sync_at` says otherwise."""
        spec = SourceCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        source = source_create(**spec.validated_data)
        return Response(SourceSerializer(source).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SourceInputSerializer, responses=SourceSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Change some fields, e.g. `{"enabled": false}` or `{"window_start_hour": 22, "window_end_hour": 6}`."""
        spec = SourceInputSerializer(data=request.data, partial=True)
        spec.is_valid(raise_exception=True)
        if not spec.validated_data:
            raise TrawlError("nothing to change: send at least one field")
        return Response(SourceSerializer(source_update(source=self.get_object(), **spec.validated_data)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        """Remove a source. Its jobs and the sources it discovered stay."""
        source_delete(source=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def crawl(self, request: Request, pk: str) -> Response:
        """Queue a job for this source now, whatever its schedule. 409 while its previous job is queued or running."""
        job = source_crawl_now(source=self.get_object(), requester=request.user)
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=RunSerializer(many=True))
    @action(detail=True, methods=["get"])
    def runs(self, request: Request, pk: str) -> Response:
        """The source's runs, newest first: pages, items new/changed/unchanged/invalid, error rate, duration, status."""
        page = self.paginate_queryset(source_runs(source=self.get_object()))
        return self.get_paginated_response(RunSerializer(page, many=True).data)

    @extend_schema(request=VolatileOverrideSerializer, responses=VolatileFieldsSerializer)
    @action(detail=True, methods=["get", "put"], url_path="volatile-fields", url_name="volatile-fields")
    def volatile_fields(self, request: Request, pk: str) -> Response:
        """Fields of the source's items that change on most of its runs (`observed`), the overrides (`always`,
        `never`) and the result (`effective`): a volatile field's change makes no item changed and no `item.changed`.
        PUT `{"always": [...], "never": [...]}` sets the overrides."""
        source = self.get_object()
        if request.method == "PUT":
            spec = VolatileOverrideSerializer(data=request.data)
            spec.is_valid(raise_exception=True)
            state = source_volatility_override(source_id=source.pk, **spec.validated_data)
        else:
            state = source_volatility(source_id=source.pk)
        return Response(VolatileFieldsSerializer(state).data)
