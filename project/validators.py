"""Validators shared by several apps' models."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator

# Trawl priority: 1 (least urgent) .. 100 (most urgent), mapped onto broker priority steps by crawls.publish.
PRIORITY_VALIDATORS = [MinValueValidator(1), MaxValueValidator(100)]
# Shards of one crawl job (crawls.services.shards); TRAWL_MAX_PARALLELISM is the same bound.
PARALLELISM_VALIDATORS = [MinValueValidator(1), MaxValueValidator(32)]
