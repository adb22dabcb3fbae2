from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Scraper registry"

    def ready(self) -> None:
        from registry.cache import on_registry_saved
        from registry.models import Scraper, ScraperVersion

        # Cache invalidation only (no business logic): a write from anywhere — services, admin, shell, fixtures —
        # must reach every worker's routing cache.
        for model in (Scraper, ScraperVersion):
            post_save.connect(on_registry_saved, sender=model, dispatch_uid=f"registry-changed-save-{model.__name__}")
            post_delete.connect(on_registry_saved, sender=model, dispatch_uid=f"registry-changed-del-{model.__name__}")
