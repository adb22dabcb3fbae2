from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Catalog: our categories and the external names mapped onto them"
    default_auto_field = "django.db.models.BigAutoField"
