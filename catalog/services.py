"""Writes of the catalog: recording external category names, mapping them automatically, human confirmations."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from catalog.classifiers import Classifier, classifier_load
from catalog.hooks import name_mapped
from catalog.models import Category, CategoryMap, MapStatus

logger = logging.getLogger("trawl.catalog")
MAX_NAME = 300


def category_names_record(*, names: Iterable[str]) -> dict[str, int | None]:
    """Store names not seen before as unmapped; return each name's internal category id (None while unmapped)."""
    wanted = {name for name in names if isinstance(name, str) and name and len(name) <= MAX_NAME}
    if not wanted:
        return {}
    CategoryMap.objects.bulk_create([CategoryMap(external_name=name) for name in wanted], ignore_conflicts=True)
    return dict(CategoryMap.objects.filter(external_name__in=wanted).values_list("external_name", "category_id"))


def category_maps_auto(
    *, classifier: Classifier | None = None, threshold: float | None = None, limit: int = 1000
) -> int:
    """Map unmapped names whose best category scores at least `threshold`; the rest keep waiting for a human.

    Only rows still `unmapped` are written (checked again in the UPDATE itself), so a human's confirmation or
    correction, even one made while the classifier ran, is never overwritten. Returns how many were mapped.
    """
    pending = list(CategoryMap.objects.filter(status=MapStatus.UNMAPPED).order_by("pk")[:limit])
    categories = list(Category.objects.all())
    if not pending or not categories:
        return 0
    classifier = classifier or classifier_load()
    if threshold is None:
        threshold = settings.TRAWL_INGESTION_CATEGORY_THRESHOLD or classifier.threshold
    matches = classifier.classify([row.external_name for row in pending], categories)
    mapped = 0
    for row, (category, score) in zip(pending, matches, strict=True):
        sure = category is not None and score >= threshold
        with transaction.atomic():
            updated = CategoryMap.objects.filter(pk=row.pk, status=MapStatus.UNMAPPED).update(
                score=round(score, 4),
                category=category if sure else None,
                status=MapStatus.AUTO if sure else MapStatus.UNMAPPED,
            )
            if updated and sure:
                mapped += 1
                name_mapped(external_name=row.external_name, category_id=category.pk)
    logger.info("category mapping: %s of %s unmapped names mapped", mapped, len(pending))
    return mapped


@transaction.atomic
def category_map_confirm(*, category_map: CategoryMap, category: Category | None, user=None) -> CategoryMap:
    """A human's word: the name means `category` (None: none of ours). Automatic runs never change it again."""
    category_map.category = category
    category_map.status = MapStatus.CONFIRMED
    category_map.confirmed_by = user if getattr(user, "pk", None) else None
    category_map.save(update_fields=["category", "status", "confirmed_by", "updated_at"])
    name_mapped(external_name=category_map.external_name, category_id=category.pk if category else None)
    return category_map
