from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "API access"

    def ready(self) -> None:
        from access import schema  # noqa: F401  (registers the OpenAPI auth scheme)
