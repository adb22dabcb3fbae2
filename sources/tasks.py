"""Beat's source dispatch: thin, the work is in sources.services.dispatch."""

from __future__ import annotations

from celery import shared_task

from sources.services.dispatch import sources_dispatch_due


# The name keeps its historical `crawls.tasks.` prefix: beat's PeriodicTask rows, the routes and operators' scripts
# send it by that name (a public contract), though the task lives with the sources it dispatches.
# Beat sends one every minute, so an older one still waiting (no ops worker for a while) is dropped, not run late.
@shared_task(name="crawls.tasks.dispatch_due_sources", expires=55)
def dispatch_due_sources() -> int:
    """Book the due sources and publish their jobs; a second beat's run finds the lease taken and does nothing."""
    return sources_dispatch_due()
