"""What registry needs to know about the jobs its versions ran, answered by crawls (above it) without registry
importing crawls: crawls provides them (crawls/version_facts.py) in CrawlsConfig.ready() (tests/test_layers.py keeps
imports downward)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from registry.models import ScraperVersion
    from registry.outcomes import VersionOutcome


class JobFacts(Protocol):
    """Met by a module of three functions (crawls.version_facts)."""

    def version_outcomes(
        self, *, versions: list[ScraperVersion], since: datetime | None = None, until: datetime | None = None
    ) -> dict[int, VersionOutcome]:
        """Outcome per version id of the jobs that ended in [since, until); every version gets an entry."""

    def failure_counts(
        self, *, version: ScraperVersion, since: datetime | None = None, last: int | None = None
    ) -> VersionOutcome:
        """Jobs and successes only: since a time, or the `last` N ended jobs."""

    def packages_running(self, sha256s: Iterable[str]) -> set[str]:
        """Of these package hashes, those a running job uses."""

    def replay_problem(self, *, version: ScraperVersion) -> str:
        """Why `version` has no clean replay of its scraper's latest recorded job ("" when it has one)."""


_provided: list[JobFacts] = []


def provide_job_facts(facts: JobFacts) -> None:
    _provided[:] = [facts]


def job_facts() -> JobFacts:
    if not _provided:
        raise RuntimeError("no JobFacts provided: the crawls app is not installed")
    return _provided[0]
