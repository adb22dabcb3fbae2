"""The worker-wide command that prunes package environments. Building one starts a package's child process, so
crawls.tasks runs it (`crawls.tasks.build_package`)."""

from __future__ import annotations

import logging

from celery.signals import worker_ready
from celery.worker.control import control_command

logger = logging.getLogger("trawl.packages")


def prune_unused_packages() -> list[str]:
    from django.db import connections

    from registry.packages.envs import envs_prune
    from registry.services.packages import packages_unused

    try:
        return envs_prune(unused=packages_unused)
    finally:
        connections.close_all()  # the worker's main process forks pool processes: it keeps no connection open


# Runs in each worker's main process (a broadcast reaches every worker, not one pool process).
@control_command(name="trawl_packages_prune")
def trawl_packages_prune(state) -> dict:
    try:
        return {"ok": prune_unused_packages()}
    except Exception as exc:  # robust: a control command that raises is only logged by Celery; say why here
        logger.exception("package prune failed")
        return {"error": str(exc)}


@worker_ready.connect(weak=False)
def prune_on_start(**_kwargs) -> None:
    try:
        prune_unused_packages()
    except Exception:
        logger.exception("package prune at worker start failed")
