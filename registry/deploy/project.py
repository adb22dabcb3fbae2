"""What a Scrapy project directory holds: its settings module, its name and its spider classes, read without
importing its code.

The spider classes are found by reading the source (ast): importing the project here would run its code and need its
dependencies in Trawl's environment, which is exactly what packaged versions avoid. This is deploy's preview (which
spider a job runs by default, its start URL for the printed crawl command); the version's spiders by name are found
by Scrapy's own SpiderLoader inside the package's environment when a worker builds it
(runtime.packaged.project_spiders).
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
    name: str = ""  # its literal `name`, or "" (a base class, or a name computed at import)


def project_check(directory: Path) -> None:
    if not directory.is_dir():
        raise TrawlError(f"{directory} is not a directory", field="project")


def has_build_file(directory: Path) -> bool:
    return (directory / "pyproject.toml").is_file() or (directory / "setup.py").is_file()


def spider_pick(directory: Path, *, spider: str = "") -> SpiderClass:
    """The version's own spider (the one a job that names none runs): --spider's, by its name or dotted path; else
    the project's only Spider subclass, or the first by name of its named ones (in SPIDER_MODULES if scrapy.cfg
    says)."""
    found = spiders_find(directory)
    if spider:
        named = [s for s in found if spider in (s.path, s.name)]
        if named:
            return named[0]
        if "." in spider:
            return SpiderClass(path=spider, start_url="")
        names = ", ".join(sorted(s.name for s in found if s.name)) or "-"
        raise TrawlError(f"the project has no spider named {spider!r} (it has: {names})", field="spider")
    if len(found) == 1:
        return found[0]
    if not found:
        raise TrawlError(f"no scrapy.Spider subclass found under {directory}: name it with --spider", field="spider")
    named = sorted((s for s in found if s.name), key=lambda s: s.name)
    if named:
        return named[0]
    paths = ", ".join(s.path for s in found)
    raise TrawlError(f"the project has {len(found)} spiders ({paths}): choose one with --spider", field="spider")


def settings_module_of(directory: Path) -> str:
    """scrapy.cfg's `[settings] default`: the project's settings module, or ""."""
    return _scrapy_cfg(directory).get("settings", "default", fallback="").strip()


def project_name_of(directory: Path) -> str:
    """The name scrapyd-deploy gives the project: scrapy.cfg's `[deploy] project`, else its settings module's
    package, else the directory's name."""
    config = _scrapy_cfg(directory)
    named = config.get("deploy", "project", fallback="").strip()
    return named or settings_module_of(directory).partition(".")[0] or directory.resolve().name


def _scrapy_cfg(directory: Path) -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(directory / "scrapy.cfg")
    return config


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
    settings_module = settings_module_of(directory)
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
            start_urls, name = _literal(node, "start_urls"), _literal(node, "name")
            start_url = str(start_urls[0]) if isinstance(start_urls, (list, tuple)) and start_urls else ""
            found.append(
                SpiderClass(
                    path=f"{module}.{node.name}", start_url=start_url, name=name if isinstance(name, str) else ""
                )
            )
    return found


def _literal(node: ast.ClassDef, attribute: str) -> object:
    """The class attribute's value if it is a literal, else None."""
    for statement in node.body:
        if isinstance(statement, ast.Assign) and any(getattr(t, "id", "") == attribute for t in statement.targets):
            try:
                return ast.literal_eval(statement.value)
            except ValueError:
                return None
    return None
