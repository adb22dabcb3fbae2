"""`python -m tests.fleet.setup_database`: the fleet's schema and its first users, on the database DATABASE_URL names
(the private PostgreSQL, directly: migrations take session locks a transaction pooler would not keep). Prints the
tokens as JSON on its last line. Beat's periodic tasks keep their shipped intervals: the fleet runs the defaults."""

from __future__ import annotations

import json

import django


def main() -> None:
    django.setup()
    from django.core.management import call_command

    from access.services import token_issue
    from project.periodic import periodic_tasks_ensure
    from registry.builtins import builtins_ensure

    call_command("migrate", verbosity=0)
    builtins_ensure()
    periodic_tasks_ensure()
    _, admin = token_issue(requester_name="fleet-admin", admin=True)
    _, requester = token_issue(requester_name="fleet-requester")
    print(json.dumps({"admin": admin, "requester": requester}))


if __name__ == "__main__":
    main()
