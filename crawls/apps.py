from django.apps import AppConfig


class CrawlsConfig(AppConfig):
    name = "crawls"
    verbose_name = "Crawls"

    def ready(self) -> None:
        from crawls import version_facts
        from crawls.services import requesters
        from crawls.worker import signals as worker_signals
        from registry.hooks import provide_job_facts

        worker_signals.connect()
        requesters.connect()
        provide_job_facts(version_facts)
