from django.apps import AppConfig


class ItemsConfig(AppConfig):
    name = "items"
    verbose_name = "Items"

    def ready(self):
        from catalog.hooks import on_name_mapped
        from items.services import items_categorize

        on_name_mapped(items_categorize)
