from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        from crawls import hooks
        from ops.alerts_and_counters import alert, counters

        hooks.on_job_ended(alert)
        hooks.on_job_ended(counters)
