"""A separate process that dispatches due sources or submits jobs, with its own database connection and broker.

Run as `python -m tests.e2e.scheduling_probe dispatch [--no-lease] [--chunk N]` (it prints "ready" once set up and
dispatches when a line comes on its stdin, so racing probes start together) or
`python -m tests.e2e.scheduling_probe submit <url> <priority> <count>` with DJANGO_SETTINGS_MODULE, DATABASE_URL and
REDIS_URL pointing at the test database and Redis. Prints one JSON line: {"jobs": [<job id>, ...]}.
"""

from __future__ import annotations

import argparse
import json
import sys

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    dispatch = commands.add_parser("dispatch")
    dispatch.add_argument("--no-lease", action="store_true")
    dispatch.add_argument("--chunk", type=int, default=0)
    submit = commands.add_parser("submit")
    submit.add_argument("url")
    submit.add_argument("priority", type=int)
    submit.add_argument("count", type=int)
    args = parser.parse_args()
    django.setup()
    from django.conf import settings

    from crawls.services import job_create
    from sources.services.sources import sources_dispatch_due

    if args.command == "dispatch":
        if args.chunk:
            settings.TRAWL_SCHEDULING_DISPATCH_CHUNK = args.chunk
        print("ready", flush=True)
        sys.stdin.readline()
        print(json.dumps({"published": sources_dispatch_due(lease=not args.no_lease)}), flush=True)
    else:
        jobs = [job_create(url=args.url, priority=args.priority) for _ in range(args.count)]
        print(json.dumps({"jobs": [str(job.pk) for job in jobs]}), flush=True)


if __name__ == "__main__":
    main()
