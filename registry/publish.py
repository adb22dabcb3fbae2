"""The registry's messages: build a version's package environment, prune unused ones (through
project.messaging.messages)."""

from __future__ import annotations

import logging

from celery import current_app, signature
from django.conf import settings

from project.messaging import messages
from project.messaging.brokers import PRIORITY_MAX

BUILD_PACKAGE = "crawls.tasks.build_package"  # registered by crawls, which runs the build
BUILD_IMPORT_SECONDS = 180  # a build's time beyond pip's: the child process importing the version's spiders
logger = logging.getLogger("trawl.packages")

PRUNE_PACKAGES = "trawl_packages_prune"  # a worker remote-control command (registry.tasks), not a task


def publish_package_build(*, version_id: int) -> None:
    """On the crawl queue, most urgent: a crawl worker builds the environment (warming its machine for the version's
    first jobs). Its time limits cover pip's own (TRAWL_PACKAGE_BUILD_TIMEOUT) plus importing the spider."""
    soft = package_build_limit()
    messages.send(
        signature(BUILD_PACKAGE, args=(version_id,), queue="crawls", priority=messages.broker_priority(PRIORITY_MAX)),
        soft_time_limit=soft,
        time_limit=soft + 60,
    )


def package_build_limit() -> float:
    """Seconds a build may take: pip's own limit plus importing the spider (the build task's soft time limit)."""
    return settings.TRAWL_PACKAGE_BUILD_TIMEOUT + BUILD_IMPORT_SECONDS


def publish_packages_prune() -> None:
    """Every worker (its main process) drops the package environments nobody needs any more."""
    current_app.control.broadcast(PRUNE_PACKAGES)


def packages_prune_everywhere() -> None:
    """Ask every worker to drop the environments nobody needs (after a deprecation). Best effort: each worker also
    prunes when it starts and when a package's last child exits."""
    try:
        publish_packages_prune()
    except Exception as exc:  # robust: a broker hiccup must not fail the deprecation that already committed
        logger.warning("package prune not broadcast: %s", exc)
