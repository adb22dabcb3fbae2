"""A packaged Scrapy project inside its child process: its spiders by `name`, found as Scrapy finds them (its
SpiderLoader on the SPIDER_MODULES of the project's settings module, inside the package's environment), and the
environment its code expects to run in (`project_environment`).

Scrapy's loader walks the modules by their file names, so a module Python's import statement cannot name
(`spiders/toscrape-css.py`) is found too; the dotted path recorded for it imports with importlib all the same.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

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


def project_environment(module: str) -> None:
    """Where the child stands, as `scrapy crawl` and scrapyd set things up for a project's code: SCRAPY_SETTINGS_MODULE
    names its settings module (a pipeline's `get_project_settings()` reads the project's values, not Scrapy's
    defaults), and a scrapy.cfg saying so, without which Scrapy, seeing that variable, finds no project data
    directory (`.scrapy/`, where HTTPCACHE_ENABLED keeps its cache) and refuses to start the cache. The directory is
    the package's own (PackageEnv.workdir_made). No module (or not a module's name): neither."""
    if not module or not all(part.isidentifier() for part in module.split(".")):  # a dotted name, nothing else
        os.environ.pop("SCRAPY_SETTINGS_MODULE", None)
        return
    os.environ["SCRAPY_SETTINGS_MODULE"] = module
    config, text = Path("scrapy.cfg"), f"[settings]\ndefault = {module}\n"
    with contextlib.suppress(OSError):
        if config.exists() and config.read_text() == text:
            return
    # The package's children share the directory: the file is replaced whole, never seen half written.
    written = Path(f"scrapy.cfg.{os.getpid()}")
    written.write_text(text)
    written.replace(config)
