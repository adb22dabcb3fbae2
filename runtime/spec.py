"""What the runtime is told about a crawl: plain values, built by crawls (crawls.services.crawl_spec) from the job
and the version it runs. The runtime reads no model: what it needs of a job, its source and its version is here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PackageSpec:
    """An uploaded wheel, as its environment is built and run from it (registry.packages.envs reads these fields)."""

    sha256: str
    path: str  # its name in the package storage
    filename: str

    def __str__(self) -> str:
        return f"{self.filename} ({self.sha256[:12]})"


@dataclass(frozen=True)
class CrawlSpec:
    """One attempt of one job, with the version routed to it."""

    job_id: str
    attempt: int
    url: str
    scraper: str  # the scraper's name
    version: str  # the version's semantic version
    spider: str  # dotted path to the Spider class (inside its package's environment for a packaged version)
    options: dict[str, Any] = field(default_factory=dict)  # the job's crawl options, as submitted
    args: dict[str, str] = field(default_factory=dict)  # the job's spider arguments (runtime/inputs/args.py)
    source_id: int | None = None  # the source the job crawls, None for an ad-hoc job
    source_config: dict[str, Any] = field(default_factory=dict)
    # A non-admin requester's job: the private-target guard applies (scheduled work crawls sources an admin added).
    guarded: bool = False
    scraper_settings: dict[str, Any] = field(default_factory=dict)
    version_settings: dict[str, Any] = field(default_factory=dict)
    package: PackageSpec | None = None  # a packaged version's wheel; None when the spider is importable here
    # A packaged Scrapy project's settings module (runtime.settings.project): beneath the scraper's and version's.
    settings_module: str = ""
