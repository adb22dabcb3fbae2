"""What a Scrapy project directory holds: its build file and its spider classes, read without importing its code.

The spider classes are found by reading the source (ast): importing the project here would run its code and need its
dependencies in Trawl's environment, which is exactly what packaged versions avoid.
"""

from __future__ import annotations

import ast
import configparser
from dataclasses import dataclass
from pathlib import Path

from project.errors import TrawlError

SPIDER_BASES = {"Spider", "CrawlSpider", "SitemapSpider", "XMLFeedSpider", "CSVFeedSpider", "InitSpider"}
SKIPPED_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", "tests", ".tox", "node_modules"}


@dataclass(frozen=True)
class SpiderClass:
    path: str  # dotted: module.Class
    start_url: str  # the first literal start_urls entry, or ""


def project_check(directory: Path) -> None:
    if not directory.is_dir():
        raise TrawlError(f"{directory} is not a directory", field="project")
    if not (directory / "pyproject.toml").is_file() and not (directory / "setup.py").is_file():
        raise TrawlError(f"{directory} has neither pyproject.toml nor setup.py: nothing to build", field="project")


def spider_pick(directory: Path, *, spider: str = "") -> SpiderClass:
    """The spider named by --spider, or the project's only Spider subclass (in SPIDER_MODULES if scrapy.cfg says)."""
    found = spiders_find(directory)
    if spider:
        named = [s for s in found if s.path == spider]
        return named[0] if named else SpiderClass(path=spider, start_url="")
    if len(found) == 1:
        return found[0]
    if not found:
        raise TrawlError(f"no scrapy.Spider subclass found under {directory}: name it with --spider", field="spider")
    names = ", ".join(s.path for s in found)
    raise TrawlError(f"the project has {len(found)} spiders ({names}): choose one with --spider", field="spider")


def spiders_find(directory: Path) -> list[SpiderClass]:
    modules = spider_modules(directory)
    found = []
    for source in sorted(directory.rglob("*.py")):
        relative = source.relative_to(directory)
        if SKIPPED_DIRS.intersection(relative.parts[:-1]) or relative.name in {"setup.py", "conftest.py"}:
            continue
        parts = relative.with_suffix("").parts
        # The src layout: src/ is where packages start, not a package itself.
        module = ".".join(parts[1:] if parts[0] == "src" and len(parts) > 1 else parts).removesuffix(".__init__")
        if modules and not any(module == m or module.startswith(f"{m}.") for m in modules):
            continue
        found.extend(_spider_classes(source, module))
    return found


def spider_modules(directory: Path) -> list[str]:
    """SPIDER_MODULES of the settings module scrapy.cfg names ([settings] default = ...), if it is a plain list."""
    config = configparser.ConfigParser()
    config.read(directory / "scrapy.cfg")
    settings_module = config.get("settings", "default", fallback="")
    if not settings_module:
        return []
    relative = Path(*settings_module.split(".")).with_suffix(".py")
    settings_file = next((d / relative for d in (directory, directory / "src") if (d / relative).is_file()), None)
    if settings_file is None:
        return []
    for node in ast.parse(settings_file.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SPIDER_MODULES" for t in node.targets):
            try:
                return [str(m) for m in ast.literal_eval(node.value)]
            except ValueError:
                return []
    return []


def _spider_classes(source: Path, module: str) -> list[SpiderClass]:
    try:
        tree = ast.parse(source.read_text(), filename=str(source))
    except SyntaxError as exc:
        raise TrawlError(f"{source}: {exc.msg} (line {exc.lineno})", field="project") from None
    local_spiders: set[str] = set()
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "") for base in node.bases}
        if bases & (SPIDER_BASES | local_spiders):
            local_spiders.add(node.name)
            found.append(SpiderClass(path=f"{module}.{node.name}", start_url=_start_url(node)))
    return found


def _start_url(node: ast.ClassDef) -> str:
    for statement in node.body:
        if isinstance(statement, ast.Assign) and any(getattr(t, "id", "") == "start_urls" for t in statement.targets):
            try:
                urls = ast.literal_eval(statement.value)
            except ValueError:
                return ""
            return str(urls[0]) if urls else ""
    return ""
