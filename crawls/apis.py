"""REST API for crawl jobs (submit, list, read, items, cancel) and batches (submit many, list, read, cancel)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from access.authentication import TOKEN_OR_BASIC
from crawls.filters import BatchFilters, DiffFilters, JobFilters
from crawls.job_diff import JobDiffSerializer, job_diff
from crawls.logs.apis import LOG_PARAMETERS, LOG_RENDERERS, LOG_RESPONSES, job_log_response
from crawls.logs.error_pages import error_page_response
from crawls.replays.runs import job_replay_create
from crawls.runs import JobDetailSerializer
from crawls.selectors import (
    batch_visible,
    batch_with_jobs,
    batches_listed,
    batches_visible,
    job_error_page_bodies,
    job_error_pages,
    job_replays,
    job_screenshot_images,
    job_screenshots,
    jobs_listed,
    jobs_visible,
)
from crawls.serializers import (
    BatchCreatedSerializer,
    BatchCreateSerializer,
    BatchDetailSerializer,
    BatchSerializer,
    JobCreateSerializer,
    JobErrorPageSerializer,
    JobItemSerializer,
    JobScreenshotSerializer,
    JobSerializer,
)
from crawls.serializers.replays import JobReplaySerializer, ReplayCreateSerializer
from crawls.services import batch_cancel, job_cancel, job_create
from crawls.services.batches import batch_create
from crawls.services.jobs import submission_precheck
from items.apis import EXPORT_FORMATS, EXPORT_RENDERERS, job_items_export
from items.selectors import job_sightings, sightings_seen
from project.web.query import QueryChecked, QueryParams


@extend_schema_view(list=extend_schema(parameters=[JobFilters]))
class JobViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = JobSerializer
    lookup_value_regex = "[0-9a-f-]{36}"
    query_params = {"list": JobFilters, "items": QueryParams, "screenshots": QueryParams, "diff": DiffFilters}

    def get_queryset(self):
        if self.action == "list":
            return jobs_listed(requester=self.request.user, **self.filters)
        return jobs_visible(requester=self.request.user)

    def get_serializer_class(self):
        # The detail adds deltas against the source's previous run: one more query, so not on every list row.
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request: Request) -> Response:
        """Submit a crawl job. It is queued at once and runs on the next free crawl worker."""
        submission_precheck(requester=request.user, specs=[request.data])
        spec = JobCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        job = job_create(requester=request.user, **spec.validated_data)
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses=JobItemSerializer(many=True),
        parameters=[
            OpenApiParameter(
                "format", str, enum=["json", *EXPORT_FORMATS], description="jsonl, csv, parquet: stream every item"
            )
        ],
    )
    @action(detail=True, methods=["get"], renderer_classes=EXPORT_RENDERERS, authentication_classes=TOKEN_OR_BASIC)
    def items(self, request: Request, pk: str) -> Response:
        """Items this job saw, with whether each was new, changed or unchanged at the time, and `data` as this job
        stored it (rebuilt from the items' field history), not as later jobs left it.

        `?format=jsonl`, `csv` or `parquet` streams every item (no pagination) instead of a JSON page.
        """
        if request.accepted_renderer.format in EXPORT_FORMATS:
            return job_items_export(job_id=self.get_object().pk, fmt=request.accepted_renderer.format)
        sightings = job_sightings(job_id=self.get_object().pk)
        page = sightings_seen(self.paginate_queryset(sightings))
        return self.get_paginated_response(JobItemSerializer(page, many=True).data)

    @extend_schema(responses=JobDiffSerializer)
    @action(detail=True, methods=["get"], url_path=r"diff/(?P<other>[0-9a-f-]{36})", url_name="diff")
    def diff(self, request: Request, pk: str, other: str) -> Response:
        """Compare this job's items with another job's of the same source (or scraper), each as it stored them:
        `added` (only the other saw), `removed` (only this one saw), `changed` (per item, the fields that differ,
        the source's volatile fields left out unless `?volatile=true`). 404 for a job you cannot see."""
        first, second = self.get_object(), get_object_or_404(jobs_visible(requester=request.user), pk=other)
        return Response(job_diff(first=first, second=second, with_volatile=self.filters.get("volatile", False)))

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a queued or running job: 202 with the job. A queued job is `cancelled` at once; a running one
        answers `running` with `cancel_requested_at` set, its crawl stops within about a second and ends `cancelled`
        (a crawl that finished first keeps its outcome)."""
        job = job_cancel(job=self.get_object())
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=JobScreenshotSerializer(many=True))
    @action(detail=True, methods=["get"])
    def screenshots(self, request: Request, pk: str) -> Response:
        """Screenshots of the job's rendered pages: those that failed, and its first pages if it asked (`options.
        screenshots`). Each `image_url` answers the JPEG."""
        shots = job_screenshots(job=self.get_object())
        return Response(JobScreenshotSerializer(shots, many=True, context={"request": request}).data)

    @extend_schema(responses={(200, "image/jpeg"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"], url_path=r"screenshots/(?P<number>[0-9]+)", url_name="screenshot")
    def screenshot(self, request: Request, pk: str, number: str) -> HttpResponse:
        """One screenshot of the job, as a JPEG image."""
        shot = get_object_or_404(job_screenshot_images(job=self.get_object()), pk=int(number))
        return HttpResponse(bytes(shot.image), content_type="image/jpeg")

    @extend_schema(request=ReplayCreateSerializer, responses={202: JobReplaySerializer})
    @action(detail=True, methods=["post"])
    def replay(self, request: Request, pk: str) -> Response:
        """Run a version of the job's scraper against the recorded job's responses (option `record`), with no
        network; the replay's `report` names, per field, the items that differ. Poll `GET .../replays/`."""
        spec = ReplayCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        replay = job_replay_create(job=self.get_object(), version=spec.validated_data["version"])
        return Response(JobReplaySerializer(replay).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=JobReplaySerializer(many=True))
    @action(detail=True, methods=["get"])
    def replays(self, request: Request, pk: str) -> Response:
        """The job's replays, newest first, each with its status and report."""
        return Response(JobReplaySerializer(job_replays(job=self.get_object()), many=True).data)

    @extend_schema(responses=JobErrorPageSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="error-pages", url_name="error-pages")
    def error_pages(self, request: Request, pk: str) -> Response:
        """The responses that made the job's spider raise (at most TRAWL_ERROR_PAGES_MAX, each its body's first
        TRAWL_ERROR_PAGE_MAX_BYTES); the log's record after the traceback names each one's `body_url`."""
        pages = job_error_pages(job=self.get_object())
        return Response(JobErrorPageSerializer(pages, many=True, context={"request": request}).data)

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"], url_path=r"error-pages/(?P<number>[0-9]+)", url_name="error-page")
    def error_page(self, request: Request, pk: str, number: str) -> HttpResponse:
        """One kept response's body, as the site sent it (as text: its own type is in `X-Trawl-Content-Type`)."""
        page = get_object_or_404(job_error_page_bodies(job=self.get_object()), number=int(number))
        return error_page_response(page)

    @extend_schema(parameters=LOG_PARAMETERS, responses=LOG_RESPONSES)
    @action(detail=True, methods=["get"], renderer_classes=LOG_RENDERERS, authentication_classes=TOKEN_OR_BASIC)
    def log(self, request: Request, pk: str) -> HttpResponse:
        """The job's log, one record a line: `2026-11-23T09:00:00.123Z INFO scrapy.core.engine Spider opened`.

        A multi-line record (a traceback) continues on lines that repeat its time, level and logger, then `| `.
        Readable while the job runs and after it ends. `?tail=N` (records), `?level=WARNING`, `?attempt=N`,
        `?q=TEXT` (the records containing TEXT, case-insensitive; `tail` counts the records it kept).
        """
        return job_log_response(job=self.get_object(), params=request.query_params)


@extend_schema_view(list=extend_schema(parameters=[BatchFilters]))
class BatchViewSet(QueryChecked, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = BatchSerializer
    lookup_value_regex = "[0-9a-f-]{36}"
    query_params = {"list": BatchFilters}

    def get_queryset(self):
        if self.action == "list":
            return batches_listed(requester=self.request.user, **self.filters)
        batches = batches_visible(requester=self.request.user)
        return batch_with_jobs(batches) if self.action == "retrieve" else batches

    def get_serializer_class(self):
        return BatchDetailSerializer if self.action == "retrieve" else BatchSerializer

    @extend_schema(request=BatchCreateSerializer, responses={201: BatchCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Submit a batch. Every job spec is checked first and nothing is created if one is bad (the 400 names it,
        e.g. `{"jobs": {"3": {"url": [...]}}}`); the jobs then run as one chord and `callback_url` receives one
        signed `batch.completed` when the last one ends."""
        submission_precheck(
            requester=request.user, specs=request.data.get("jobs") if isinstance(request.data, dict) else None
        )
        spec = BatchCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        batch = batch_create(requester=request.user, **spec.validated_data)
        return Response(BatchCreatedSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: BatchSerializer})
    def destroy(self, request: Request, pk: str) -> Response:
        """Cancel the batch: queued jobs end `cancelled` at once, running crawls stop within seconds, and the batch
        then completes as `cancelled` (its `batch.completed` carries the totals). 409 if it already ended."""
        batch = batch_cancel(batch=self.get_object())
        fresh = batch_visible(requester=request.user, batch_id=batch.pk)
        return Response(BatchSerializer(fresh).data, status=status.HTTP_202_ACCEPTED)
