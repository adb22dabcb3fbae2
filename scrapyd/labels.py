"""scrapyd's version labels on Trawl's semantic versions.

scrapyd-deploy labels a version with the time (`1732856400`) or `git describe` (`r23-g1a2b3c4`); Trawl's versions
are semantic. A label that is a semantic version is kept as it is; any other becomes the next patch release with the
label as its build metadata (`1.0.3+1732856400`), so upload order stays the running order, as in scrapyd (the
latest upload runs) and listversions answers the label that was sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from registry.semver import SEMVER, is_semver, semver_bump, semver_key

UNSAFE = re.compile(r"[^0-9A-Za-z-]+")


def label_of(version: str) -> str:
    """The label scrapyd clients know a stored version by."""
    match = SEMVER.match(version)
    build = match.group(5) if match else None
    return build.removeprefix("scrapyd.") if build and build.startswith("scrapyd.") else version


def version_for_label(label: str, *, existing: Iterable[str]) -> str:
    """The semantic version a new upload labelled `label` is stored as."""
    if is_semver(label):
        return label
    identifiers = ".".join(part for part in UNSAFE.split(label) if part)
    if not identifiers:
        raise ValueError(f"version {label!r} has no letter or digit")
    ordered = sorted((v for v in existing if is_semver(v)), key=semver_key)
    base = semver_bump(ordered[-1].split("+")[0] if ordered else None, "patch")
    return f"{base}+scrapyd.{identifiers}"
