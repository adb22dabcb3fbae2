"""The rules a registry write must obey, judged before anything is written (services and admin forms alike)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.core.exceptions import ValidationError

from registry.errors import RegistryError
from registry.models import Scraper, ScraperVersion
from registry.semver import is_semver, semver_key


def allocation_problem(*, scraper: Scraper, total: int) -> str | None:
    if total <= 100:
        return None
    return (
        f"the active versions of {scraper.name!r} would get {total}% of traffic; at most 100% "
        "(what no version takes goes to the default)"
    )


def versions_problems(
    *, scraper: Scraper, versions: Sequence[ScraperVersion], fields: list[str] | None = None
) -> dict[str, list[str]]:
    """Everything wrong with saving `versions` together, by field, judged against the scraper's other versions.

    `fields` limits field validation to those fields. Nothing is written: forms show the result by the inputs.
    """
    errors: dict[str, list[str]] = defaultdict(list)
    many = len(versions) > 1
    others = ScraperVersion.objects.none()
    if scraper.pk is not None:
        others = ScraperVersion.objects.filter(scraper=scraper).exclude(pk__in=[v.pk for v in versions if v.pk])
    taken = {semver_key(o.version): o.version for o in others if is_semver(o.version)}
    for version in versions:
        prefix = f"{version.version}: " if many else ""
        if version.scraper_id != scraper.pk:
            errors["scraper"].append(f"{prefix}belongs to another scraper")
        _field_errors(version, fields, errors, prefix)
        if is_semver(version.version) and (fields is None or "version" in fields):
            clash = taken.get(semver_key(version.version))
            if clash == version.version:
                errors["version"].append(f"scraper {scraper.name!r} already has a version {clash!r}")
            elif clash:
                errors["version"].append(f"{version.version!r} has the same precedence as {clash!r}")
            taken[semver_key(version.version)] = version.version
        if version.deprecated_at is not None and version.is_default:
            errors["is_default"].append(f"{prefix}a deprecated version cannot be the default")
        if version.deprecated_at is not None and version.traffic_pct:
            errors["traffic_pct"].append(f"{prefix}a deprecated version takes no traffic")
    if sum(v.is_default for v in versions) > 1:
        errors["is_default"].append("only one version of a scraper can be the default")
    if "traffic_pct" not in errors:
        total = sum(o.traffic_pct for o in others if o.deprecated_at is None)
        total += sum(v.traffic_pct or 0 for v in versions if v.deprecated_at is None)
        problem = allocation_problem(scraper=scraper, total=total)
        if problem:
            errors["traffic_pct"].append(problem)
    return dict(errors)


def _field_errors(version: ScraperVersion, fields: list[str] | None, errors: dict, prefix: str) -> None:
    exclude = None if fields is None else [f.name for f in ScraperVersion._meta.fields if f.name not in fields]
    try:
        version.full_clean(exclude=exclude, validate_constraints=False)
    except ValidationError as exc:
        for field, messages in RegistryError.from_validation_error(exc).errors.items():
            errors[field].extend(prefix + message for message in messages)
