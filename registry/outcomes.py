"""What a version's jobs did, as operators and canary rollback read it (counted by crawls: registry/hooks.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class VersionOutcome:
    """What a version's jobs did: `jobs` counts succeeded, failed and dead ones; cancelled ones are apart."""

    jobs: int = 0
    succeeded: int = 0
    cancelled: int = 0
    items: int = 0
    median_duration: float | None = None
    error_classes: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.jobs - self.succeeded

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.jobs if self.jobs else None

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.jobs if self.jobs else None

    @property
    def items_per_job(self) -> float | None:
        return self.items / self.jobs if self.jobs else None
