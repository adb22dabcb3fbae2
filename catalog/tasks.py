"""Beat's category mapping: thin, the work is in catalog.services."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="catalog.tasks.map_categories", ignore_result=True)
def map_categories() -> int:
    from catalog.services import category_maps_auto

    return category_maps_auto()
