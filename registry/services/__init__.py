"""Writes over the registry: routing, registering and rolling versions out, automatic rollback."""

from registry.services.rollback import version_judge, version_rollback, version_rollback_check
from registry.services.routing import VersionBuilding, route_pick, version_route
from registry.services.validation import allocation_problem, versions_problems
from registry.services.versions import (
    scraper_create,
    traffic_set,
    version_create,
    version_deprecate,
    version_make_default,
    version_promote,
    versions_save,
)

__all__ = [
    "VersionBuilding",
    "allocation_problem",
    "route_pick",
    "scraper_create",
    "traffic_set",
    "version_create",
    "version_deprecate",
    "version_judge",
    "version_make_default",
    "version_promote",
    "version_rollback",
    "version_rollback_check",
    "version_route",
    "versions_problems",
    "versions_save",
]
