"""API input and output shapes of crawls: jobs (jobs.py) and batches (batches.py)."""

from crawls.serializers.batches import (
    BatchCreatedSerializer,
    BatchCreateSerializer,
    BatchDetailSerializer,
    BatchJobSerializer,
    BatchJobSpecSerializer,
    BatchSerializer,
)
from crawls.serializers.jobs import (
    JobCreateSerializer,
    JobErrorPageSerializer,
    JobItemSerializer,
    JobOptionsSerializer,
    JobScreenshotSerializer,
    JobSerializer,
    spider_args_field,
)

__all__ = [
    "BatchCreateSerializer",
    "BatchCreatedSerializer",
    "BatchDetailSerializer",
    "BatchJobSerializer",
    "BatchJobSpecSerializer",
    "BatchSerializer",
    "JobCreateSerializer",
    "JobErrorPageSerializer",
    "JobItemSerializer",
    "JobOptionsSerializer",
    "JobScreenshotSerializer",
    "JobSerializer",
    "spider_args_field",
]
