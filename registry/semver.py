"""Semantic version parsing and ordering (1.10.0 is newer than 1.9.0; 1.0.0-rc.1 is older than 1.0.0)."""

from __future__ import annotations

import re

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def is_semver(value: str) -> bool:
    return bool(SEMVER.match(value))


def semver_key(value: str) -> tuple:
    """Sort key following semver precedence; build metadata is ignored."""
    match = SEMVER.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.0)")
    major, minor, patch, pre, _build = match.groups()
    if pre is None:
        # A release sorts after every pre-release of the same version.
        pre_key: tuple = (1,)
    else:
        pre_key = (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    return int(major), int(minor), int(patch), pre_key


def semver_bump(latest: str | None, part: str) -> str:
    """The next `part` (major, minor or patch) release after `latest`; the first release is 1.0.0."""
    if latest is None:
        return "1.0.0"
    major, minor, patch = semver_key(latest)[:3]
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    # A pre-release's patch bump is that release itself (1.2.0-rc.1 → 1.2.0), as semver orders them.
    return f"{major}.{minor}.{patch + (0 if SEMVER.match(latest).group(4) else 1)}"
