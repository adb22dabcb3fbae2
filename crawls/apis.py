"""REST API for crawl jobs: submit, list, read, items, cancel."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from crawls.item_apis import EXPORT_RENDERERS, job_items_export
from crawls.selectors import job_items, jobs_visible
from crawls.serializers import JobCreateSerializer, JobItemSerializer, JobSerializer
from crawls.services import job_cancel, job_create


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = JobSerializer
    lookup_value_regex = "[0-9a-f-]{36}"

    def get_queryset(self):
        return jobs_visible(requester=self.request.user)

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request: Request) -> Response:
        """Submit a crawl job. It is queued at once and runs on the next free crawl worker."""
        spec = JobCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        job = job_create(requester=request.user, **spec.validated_data)
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses=JobItemSerializer(many=True),
        parameters=[
            OpenApiParameter("format", str, enum=["json", "jsonl", "csv"], description="jsonl, csv: stream every item")
        ],
    )
    @action(detail=True, methods=["get"], renderer_classes=EXPORT_RENDERERS)
    def items(self, request: Request, pk: str) -> Response:
        """Items this job saw, with whether each was new, changed or unchanged at the time.

        `?format=jsonl` or `?format=csv` streams every item (no pagination) instead of a JSON page.
        """
        if request.accepted_renderer.format in ("jsonl", "csv"):
            return job_items_export(job=self.get_object(), fmt=request.accepted_renderer.format)
        sightings = job_items(job=self.get_object())
        page = self.paginate_queryset(sightings)
        return self.get_paginated_response(JobItemSerializer(page, many=True).data)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a queued or running job. A running crawl stops within a few seconds and ends `cancelled`."""
        job = job_cancel(job=self.get_object())
        return Response(JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)
