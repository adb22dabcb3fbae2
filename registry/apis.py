"""REST API for the scraper registry (admin tokens only): scrapers, versions, traffic split, comparison."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from access.permissions import IsAdminRequester
from project.web.query import QueryChecked, QueryParams
from registry.models import Scraper
from registry.selectors import (
    WINDOWS,
    scraper_comparison,
    scrapers_by_name,
    traffic_of,
    versions_of,
    versions_of_scraper_named,
    window_start,
)
from registry.serializers import (
    TRAFFIC_SCHEMA,
    OutcomeSerializer,
    ScraperCreateSerializer,
    ScraperSerializer,
    VersionCreateSerializer,
    VersionSerializer,
    VersionUploadSerializer,
)
from registry.services import (
    scraper_create,
    traffic_set,
    version_create,
    version_deprecate,
    version_make_default,
    version_promote,
)
from registry.services.packages import version_upload

SCRAPER_NAME = r"[-a-zA-Z0-9_]+"
SCRAPER_PARAM = OpenApiParameter("scraper_name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Scraper name.")
WINDOW_PARAM = OpenApiParameter(
    "window", OpenApiTypes.STR, description=f"{', '.join(WINDOWS)} or seconds; default 24h. Jobs that ended in it."
)


class ScraperViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Scrapers (a site key or job type) with their versions and traffic split."""

    permission_classes = [IsAdminRequester]
    query_params = {"list": QueryParams}
    serializer_class = ScraperSerializer
    lookup_field = "name"
    lookup_value_regex = SCRAPER_NAME

    def get_queryset(self):
        return scrapers_by_name()

    @extend_schema(request=ScraperCreateSerializer, responses={201: ScraperSerializer})
    def create(self, request: Request) -> Response:
        """Register a scraper. Versions are added with `POST /api/scrapers/{name}/versions/`."""
        spec = ScraperCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        scraper = scraper_create(**spec.validated_data)
        return Response(ScraperSerializer(scraper).data, status=status.HTTP_201_CREATED)

    @extend_schema(methods=["GET"], responses={200: OpenApiResponse(TRAFFIC_SCHEMA)})
    @extend_schema(
        methods=["PUT"], request={"application/json": TRAFFIC_SCHEMA}, responses={200: OpenApiResponse(TRAFFIC_SCHEMA)}
    )
    @action(detail=True, methods=["get", "put"])
    def traffic(self, request: Request, name: str) -> Response:
        """The traffic split. PUT replaces it atomically: `{"1.0.0": 90, "1.1.0": 10}`; active versions left out get
        0%, what no version takes goes to the default. A sum over 100, an unknown or deprecated version: 400, and
        nothing changes. Every worker routes by the new split from its next job."""
        scraper = self.get_object()
        if request.method == "PUT":
            return Response(traffic_set(scraper=scraper, allocation=request.data))
        return Response(traffic_of(scraper=scraper))

    @extend_schema(parameters=[WINDOW_PARAM], responses=OutcomeSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def compare(self, request: Request, name: str) -> Response:
        """Per version, side by side: jobs, success rate, items per job, median duration, error classes."""
        since = window_start(request.query_params.get("window", ""))
        rows = scraper_comparison(scraper=self.get_object(), since=since)
        return Response(OutcomeSerializer(rows, many=True).data)


@extend_schema_view(
    list=extend_schema(parameters=[SCRAPER_PARAM]),
    retrieve=extend_schema(parameters=[SCRAPER_PARAM]),
    create=extend_schema(parameters=[SCRAPER_PARAM]),
    deprecate=extend_schema(parameters=[SCRAPER_PARAM]),
    promote=extend_schema(parameters=[SCRAPER_PARAM]),
)
class VersionViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A scraper's versions, newest first by semantic version."""

    permission_classes = [IsAdminRequester]
    query_params = {"list": QueryParams}
    parser_classes = [JSONParser, MultiPartParser]  # a version's fields as JSON, or as a form beside its wheel
    serializer_class = VersionSerializer
    lookup_field = "version"
    lookup_value_regex = r"[^/]+"

    def get_scraper(self) -> Scraper:
        return get_object_or_404(scrapers_by_name(), name=self.kwargs["scraper_name"])

    def get_queryset(self):
        return versions_of_scraper_named(scraper_name=self.kwargs["scraper_name"])

    def list(self, request: Request, scraper_name: str) -> Response:
        versions = versions_of(scraper=self.get_scraper())
        page = self.paginate_queryset(versions)
        return self.get_paginated_response(VersionSerializer(page, many=True).data)

    @extend_schema(
        request={"application/json": VersionCreateSerializer, "multipart/form-data": VersionUploadSerializer},
        responses={201: VersionSerializer},
    )
    def create(self, request: Request, scraper_name: str) -> Response:
        """Register a version. Refused (400, naming the field) if the version is not semver or already exists, the
        spider does not import to a scrapy.Spider, or active traffic would exceed 100%.

        As multipart/form-data with a `package` file (a wheel), the spider is a dotted path inside the package: the
        version is created with `package_status` `building` and routes once a worker has built its environment
        (`ready`); a build that fails leaves it `failed` with the reason in `package_log`."""
        scraper = self.get_scraper()
        if request.content_type.startswith("multipart/form-data"):
            spec = VersionUploadSerializer(data=request.data)
            spec.is_valid(raise_exception=True)
            fields = dict(spec.validated_data)
            upload = fields.pop("package")
            version = version_upload(scraper=scraper, package=upload, filename=upload.name, **fields)
        else:
            spec = VersionCreateSerializer(data=request.data)
            spec.is_valid(raise_exception=True)
            version = version_create(scraper=scraper, **spec.validated_data)
        return Response(VersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=VersionSerializer)
    @action(detail=True, methods=["post"])
    def deprecate(self, request: Request, scraper_name: str, version: str) -> Response:
        """Never route to this version again (its traffic goes to 0%). The default must be replaced first."""
        return Response(VersionSerializer(version_deprecate(version=self.get_object())).data)

    @extend_schema(request=None, responses=VersionSerializer)
    @action(detail=True, methods=["post"])
    def promote(self, request: Request, scraper_name: str, version: str) -> Response:
        """Make this version the stable default with 100% of traffic; every other version goes to 0%."""
        return Response(VersionSerializer(version_promote(version=self.get_object())).data)

    @extend_schema(request=None, responses=VersionSerializer)
    @action(detail=True, methods=["post"])
    def default(self, request: Request, scraper_name: str, version: str) -> Response:
        """Make this version the default: it takes the unpinned jobs no traffic share claims (`manage.py deploy`'s
        going live); the other versions keep their shares. A version not built yet routes once it is."""
        return Response(VersionSerializer(version_make_default(version=self.get_object())).data)
