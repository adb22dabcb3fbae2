"""A packaged Scrapy project's spiders by `name`, found as Scrapy finds them: its SpiderLoader on the SPIDER_MODULES of
the project's settings module, inside the package's environment (in its child process, when a worker builds it).

Scrapy's loader walks the modules by their file names, so a module Python's import statement cannot name
(`spiders/toscrape-css.py`) is found too; the dotted path recorded for it imports with importlib all the same.
"""

from __future__ import annotations

from scrapy.settings import Settings
from scrapy.spiderloader import SpiderLoader

from registry.spiders import spider_load


def spiders_found(default_spider: str, *, settings_module: str = "") -> dict[str, str]:
    """{name: dotted class path} of the project's spiders, the version's own (`default_spider`) among them. Raises
    what importing them raises (SpiderImportError for the version's own)."""
    found: dict[str, str] = {}
    if settings_module:
        settings = Settings()
        settings.setmodule(settings_module, priority="project")
        settings.set("SPIDER_LOADER_WARN_ONLY", False)  # a spider module that does not import fails the build
        loader = SpiderLoader.from_settings(settings)
        for name in loader.list():
            spider_cls = loader.load(name)
            found[name] = f"{spider_cls.__module__}.{spider_cls.__qualname__}"
    spider_cls = spider_load(default_spider)
    if getattr(spider_cls, "name", None):
        found.setdefault(spider_cls.name, default_spider)
    return found
