from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "API access"

    def ready(self) -> None:
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        from access.rates import rate_parse

        # A malformed rate stops the process as it starts, not every API request later with a 500. (A package's
        # child, project.settings_child, serves no API and has no rates.)
        for name in ("TRAWL_API_RATE", "TRAWL_API_ADMIN_RATE"):
            if not hasattr(settings, name):
                continue
            try:
                rate_parse(getattr(settings, name))
            except ValueError as exc:
                raise ImproperlyConfigured(f"{name}: {exc}") from None
