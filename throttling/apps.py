from django.apps import AppConfig


class ThrottlingConfig(AppConfig):
    name = "throttling"
    verbose_name = "Throttling"
