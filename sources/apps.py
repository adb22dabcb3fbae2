from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "sources"
    verbose_name = "Sources"

    def ready(self) -> None:
        from crawls import hooks
        from sources.schedule_feedback import source_feedback
        from sources.services.children import source_crawl_extras

        hooks.on_crawl_finished(source_crawl_extras)
        hooks.on_job_ending(source_feedback)
