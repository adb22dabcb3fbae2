"""Beat's source dispatch: thin, the work is in sources.services.dispatch."""

from __future__ import annotations

from project.messaging.messages import shared_task_aliased
from sources.services.dispatch import sources_dispatch_due


# Also registered as `crawls.tasks.dispatch_due_sources`: beat schedules, queued messages and operators' scripts that
# send that name still dispatch. Beat sends one every minute, so an older one still waiting (no ops worker for a while)
# is dropped, not run late.
@shared_task_aliased(
    name="sources.tasks.dispatch_due_sources", aliases=("crawls.tasks.dispatch_due_sources",), expires=55
)
def dispatch_due_sources() -> int:
    """Book the due sources and publish their jobs; a second beat's run finds the lease taken and does nothing."""
    return sources_dispatch_due()
