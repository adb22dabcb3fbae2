"""REST API for batches: submit many jobs at once, list, read (status, totals, jobs), cancel."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from crawls.selectors import batch_with_jobs, batches_visible
from crawls.serializers import BatchCreatedSerializer, BatchCreateSerializer, BatchDetailSerializer, BatchSerializer
from crawls.services.batches import batch_cancel, batch_create


class BatchViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = BatchSerializer
    lookup_value_regex = "[0-9a-f-]{36}"

    def get_queryset(self):
        batches = batches_visible(requester=self.request.user)
        return batch_with_jobs(batches) if self.action == "retrieve" else batches

    def get_serializer_class(self):
        return BatchDetailSerializer if self.action == "retrieve" else BatchSerializer

    @extend_schema(request=BatchCreateSerializer, responses={201: BatchCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Submit a batch. Every job spec is checked first and nothing is created if one is bad (the 400 names it,
        e.g. `{"jobs": {"3": {"url": [...]}}}`); the jobs then run as one chord and `callback_url` receives one
        signed `batch.completed` when the last one ends."""
        spec = BatchCreateSerializer(data=request.data)
        spec.is_valid(raise_exception=True)
        batch = batch_create(requester=request.user, **spec.validated_data)
        return Response(BatchCreatedSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: BatchSerializer})
    def destroy(self, request: Request, pk: str) -> Response:
        """Cancel the batch: queued jobs end `cancelled` at once, running crawls stop within seconds, and the batch
        then completes as `cancelled` (its `batch.completed` carries the totals). 409 if it already ended."""
        batch = batch_cancel(batch=self.get_object())
        fresh = batches_visible(requester=request.user).get(pk=batch.pk)
        return Response(BatchSerializer(fresh).data, status=status.HTTP_202_ACCEPTED)
