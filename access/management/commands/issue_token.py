import json

from django.core.management.base import BaseCommand, CommandError

from access.services import token_issue
from project.errors import TrawlError


class Command(BaseCommand):
    help = "Issue an API token for a requester (created if new) and print it as one JSON line."

    def add_arguments(self, parser):
        parser.add_argument("requester", help="requester name, e.g. pricing-team")
        parser.add_argument("--admin", action="store_true", help="may also manage scrapers, sources and throttles")
        parser.add_argument(
            "--max-active-jobs",
            type=int,
            default=None,
            help=(
                "cap on its queued + running jobs, a job with parallelism N counting N (submissions beyond: 429); "
                "unset: TRAWL_DEFAULT_MAX_ACTIVE_JOBS"
            ),
        )

    def handle(self, *args, requester: str, admin: bool, max_active_jobs: int | None, **options):
        if max_active_jobs is not None and max_active_jobs < 0:
            raise CommandError("--max-active-jobs must be 0 or more")
        try:
            owner, token = token_issue(requester_name=requester, admin=admin, max_active_jobs=max_active_jobs)
        except TrawlError as exc:
            raise CommandError(exc.message) from None
        line = {"requester": owner.name, "token": token, "webhook_secret": owner.webhook_secret}
        self.stdout.write(json.dumps(line))
