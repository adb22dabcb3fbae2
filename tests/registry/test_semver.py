"""Semantic versions: "latest" means semver-latest, not newest row or string order."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from registry.models import validate_semver
from registry.semver import is_semver, semver_bump, semver_key

# The precedence example from semver.org §11, lowest first.
SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
]


def test_minor_versions_compare_as_numbers():
    assert semver_key("1.10.0") > semver_key("1.9.0")
    assert semver_key("2.0.0") > semver_key("1.99.99")
    assert semver_key("0.0.10") > semver_key("0.0.9")


def test_prerelease_sorts_before_its_release():
    assert semver_key("1.0.0-rc.1") < semver_key("1.0.0")
    assert semver_key("1.0.0-rc.1") > semver_key("0.9.9")


def test_semver_spec_precedence():
    assert sorted(reversed(SPEC_ORDER), key=semver_key) == SPEC_ORDER


def test_build_metadata_is_ignored():
    assert semver_key("1.2.3+build.5") == semver_key("1.2.3")


def test_latest_is_picked_by_semver():
    assert max(["1.9.0", "1.10.0", "1.10.0-rc.1", "1.2.0"], key=semver_key) == "1.10.0"


@pytest.mark.parametrize("value", ["1.0.0", "0.1.0", "10.20.30", "1.0.0-rc.1", "1.0.0-alpha-1", "1.0.0+20240101"])
def test_valid_versions(value):
    assert is_semver(value)
    validate_semver(value)


@pytest.mark.parametrize("value", ["", "1", "1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0.0", "latest"])
def test_invalid_versions_are_rejected(value):
    assert not is_semver(value)
    with pytest.raises(ValueError, match="not a semantic version"):
        semver_key(value)
    with pytest.raises(ValidationError):
        validate_semver(value)


@pytest.mark.parametrize(
    ("latest", "part", "bumped"),
    [
        (None, "patch", "1.0.0"),
        ("1.4.2", "patch", "1.4.3"),
        ("1.4.2", "minor", "1.5.0"),
        ("1.4.2", "major", "2.0.0"),
        ("1.5.0-rc.1", "patch", "1.5.0"),
        ("1.4.2+build.7", "patch", "1.4.3"),
    ],
)
def test_deploy_bump_follows_the_latest_version(latest, part, bumped):
    assert semver_bump(latest, part) == bumped
