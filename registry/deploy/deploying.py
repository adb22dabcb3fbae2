"""The deploy steps in order: pick the spider, build, choose the version, register it, wait for its build."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project.errors import TrawlError
from registry.deploy.build import wheel_build, wheel_version
from registry.deploy.project import SpiderClass, spider_pick
from registry.deploy.targets import Target
from registry.semver import is_semver, semver_bump, semver_key

POLL_SECONDS = 1.0


@dataclass
class DeployRequest:
    directory: Path
    scraper: str
    version: str = ""
    bump: str = ""
    spider: str = ""
    variant: str = "stable"
    traffic_pct: int = 0
    is_default: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


def deploy_run(*, request: DeployRequest, target: Target, say: Callable[[str], None]) -> tuple[dict, SpiderClass]:
    """Register the project as a new version on `target`; returns the version's JSON (status `building`)."""
    spider = spider_pick(request.directory, spider=request.spider)
    say(f"spider: {spider.path}")
    with tempfile.TemporaryDirectory(prefix="trawl-wheel-") as out:
        wheel = wheel_build(request.directory, out=Path(out))
        say(f"built {wheel.name} ({wheel.stat().st_size:,} bytes)")
        if target.scraper_ensure(request.scraper):
            say(f"created scraper {request.scraper!r} on {target.where} (it did not exist)")
        existing = target.versions(request.scraper)
        version = version_choose(request, wheel_version(wheel), [v["version"] for v in existing])
        fields = {
            "version": version,
            "spider": spider.path,
            "variant": request.variant,
            "traffic_pct": request.traffic_pct,
            # A scraper with no default routes no unpinned job: its first stable version becomes the default.
            "is_default": request.is_default or (request.variant == "stable" and not _has_default(existing)),
            "settings": request.settings,
        }
        created = target.upload(request.scraper, wheel, fields)
    default = ", default" if created.get("is_default") else ""
    say(f"uploaded {request.scraper} {version} ({created['variant']}{default}, {created['traffic_pct']}% traffic)")
    return created, spider


def version_choose(request: DeployRequest, project_version: str, existing: list[str]) -> str:
    if request.version:
        return request.version
    if request.bump:
        ordered = sorted((v for v in existing if is_semver(v)), key=semver_key)
        return semver_bump(ordered[-1] if ordered else None, request.bump)
    if not is_semver(project_version):
        raise TrawlError(
            f"the project's version {project_version!r} is not a semantic version: pass --version or --bump",
            field="version",
        )
    return project_version


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


def _has_default(versions: list[dict]) -> bool:
    return any(v.get("is_default") and not v.get("deprecated_at") for v in versions)
