import json

from django.core.management.base import BaseCommand

from access.services import token_issue


class Command(BaseCommand):
    help = "Issue an API token for a requester (created if new) and print it as one JSON line."

    def add_arguments(self, parser):
        parser.add_argument("requester", help="requester name, e.g. pricing-team")
        parser.add_argument("--admin", action="store_true", help="may also manage scrapers, sources and throttles")

    def handle(self, *args, requester: str, admin: bool, **options):
        owner, token = token_issue(requester_name=requester, admin=admin)
        line = {"requester": owner.name, "token": token, "webhook_secret": owner.webhook_secret}
        self.stdout.write(json.dumps(line))
