"""The deploy steps in order: pick the spider, build, choose the version, register it, wait for its build, go live."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project.errors import TrawlError
from registry.deploy.build import wheel_build, wheel_version
from registry.deploy.project import (
    SpiderClass,
    has_build_file,
    project_name_of,
    settings_module_of,
    spider_pick,
    spiders_find,
)
from registry.deploy.targets import Target
from registry.semver import is_semver, semver_bump, semver_key

POLL_SECONDS = 1.0


@dataclass
class DeployRequest:
    directory: Path
    scraper: str = ""  # default: the project's name (scrapy.cfg [deploy] project, else its settings' package)
    version: str = ""
    bump: str = ""
    spider: str = ""
    variant: str = "stable"
    traffic_pct: int = 0
    is_default: bool = False
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def goes_live(self) -> bool:
        """A stable deploy becomes the default once built, unless a traffic share was asked (scrapyd runs the
        latest upload)."""
        return self.variant == "stable" and not self.traffic_pct


@dataclass
class Deployed:
    scraper: str
    version: dict[str, Any]  # the API's version JSON, as uploaded (status `building`)
    spider: SpiderClass  # the version's own spider
    replaces: str = ""  # the default it takes over from when it goes live ("" when none)


def deploy_run(*, request: DeployRequest, target: Target, say: Callable[[str], None]) -> Deployed:
    """Register the project as a new version on `target`, every spider of it from one upload."""
    spider = spider_pick(request.directory, spider=request.spider)
    scraper = request.scraper or project_name_of(request.directory)
    named = sorted({found.name for found in spiders_find(request.directory) if found.name})
    say(f"spider: {spider.path}" + (f" (the project's spiders: {', '.join(named)})" if len(named) > 1 else ""))
    settings_module = settings_module_of(request.directory)
    generated = not has_build_file(request.directory)
    with tempfile.TemporaryDirectory(prefix="trawl-wheel-") as out:
        wheel = wheel_build(request.directory, out=Path(out))
        built = " (setup generated in the build copy)" if generated else ""
        say(f"built {wheel.name} ({wheel.stat().st_size:,} bytes){built}")
        if target.scraper_ensure(scraper):
            say(f"created scraper {scraper!r} on {target.where} (it did not exist)")
        existing = target.versions(scraper)
        project_version = "" if generated else wheel_version(wheel)
        version = version_choose(request, project_version, [v["version"] for v in existing])
        fields = {
            "version": version,
            "spider": spider.path,
            "variant": request.variant,
            "traffic_pct": request.traffic_pct,
            "is_default": request.is_default,
            "settings": request.settings,
            **({"settings_module": settings_module} if settings_module else {}),
        }
        created = target.upload(scraper, wheel, fields)
    default = ", default" if created.get("is_default") else ""
    say(f"uploaded {scraper} {version} ({created['variant']}{default}, {created['traffic_pct']}% traffic)")
    return Deployed(scraper=scraper, version=created, spider=spider, replaces=_default_of(existing))


def version_choose(request: DeployRequest, project_version: str, existing: list[str]) -> str:
    """--version; --bump from the latest; else the project's own version if semantic and unused; else an unused
    one: the latest's next patch (1.0.0 for a scraper's first)."""
    if request.version:
        return request.version
    ordered = sorted((v for v in existing if is_semver(v)), key=semver_key)
    if request.bump:
        return semver_bump(ordered[-1] if ordered else None, request.bump)
    if is_semver(project_version) and project_version not in existing:
        return project_version
    if not ordered:
        return project_version if is_semver(project_version) else "1.0.0"
    chosen = semver_bump(ordered[-1], "patch")
    while chosen in existing:  # a non-semver or odd history: never an existing version
        chosen = semver_bump(chosen, "patch")
    return chosen


def go_live(*, target: Target, deployed: Deployed, say: Callable[[str], None]) -> None:
    """The built version becomes the scraper's default, saying which one it replaced (other versions keep their
    traffic shares)."""
    version = deployed.version["version"]
    target.make_default(deployed.scraper, version)
    replaced = f", replacing {deployed.replaces}" if deployed.replaces and deployed.replaces != version else ""
    say(f"live: {deployed.scraper} {version} is the default now{replaced}")


def build_wait(*, target: Target, scraper: str, version: str, timeout: float) -> dict:
    """Poll until a worker has built the version: `ready` or `failed` (raised with its package_log)."""
    deadline = time.monotonic() + timeout
    while True:
        current = target.version(scraper, version)
        if current["package_status"] == "ready":
            return current
        if current["package_status"] == "failed":
            raise TrawlError(f"{scraper} {version}: the build failed\n{current['package_log']}", field="package")
        if time.monotonic() > deadline:
            raise TrawlError(
                f"{scraper} {version} is still building after {timeout:.0f}s: is a crawl worker running? "
                f"It becomes ready when one builds it.",
                field="package",
            )
        time.sleep(POLL_SECONDS)


def _default_of(versions: list[dict]) -> str:
    return next((v["version"] for v in versions if v.get("is_default") and not v.get("deprecated_at")), "")
