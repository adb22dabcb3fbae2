"""Existing installs: wheels uploaded before they moved to the package storage stayed in one host's directory
(TRAWL_PACKAGE_DIR, var/packages/ by default). `manage.py trawl_packages_import`, run on that host, copies them over so
every host can build their versions."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from registry.models import Package


class Outcome(StrEnum):
    PRESENT = "already in storage"
    COPIED = "copied"
    MISSING = "not in the directory"
    CHANGED = "differs from the upload (SHA-256): not copied"


def packages_import(*, directory: Path, dry_run: bool = False) -> list[tuple[Package, Outcome]]:
    """Each package, and what became of its wheel: already in the storage, copied from `directory` (the wheel found
    at `<directory>/<sha256>/<file name>` with the uploaded wheel's SHA-256), or not there to copy."""
    storage = storages[settings.TRAWL_PACKAGE_STORAGE]
    done = []
    for package in Package.objects.order_by("created_at", "pk"):
        if storage.exists(package.path):
            done.append((package, Outcome.PRESENT))
            continue
        source = directory / package.path
        if not source.is_file():
            done.append((package, Outcome.MISSING))
            continue
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != package.sha256:
            done.append((package, Outcome.CHANGED))
            continue
        if not dry_run:
            storage.save(package.path, ContentFile(data))
        done.append((package, Outcome.COPIED))
    return done
