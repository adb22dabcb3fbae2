"""A separate process that routes one scraper's jobs over and over, like a worker, printing each change it sees.

Run as `python -m tests.registry.route_probe <scraper> <seconds>` with DJANGO_SETTINGS_MODULE, DATABASE_URL and
REDIS_URL pointing at the test database and Redis. Prints one JSON line per change of routed version:
{"at": <unix time>, "version": "<version>", "routes": <routes so far>}.
"""

from __future__ import annotations

import json
import sys
import time

import django


def main(scraper_name: str, seconds: float) -> None:
    django.setup()
    from registry.models import Scraper
    from registry.services import version_route

    scraper = Scraper.objects.get(name=scraper_name)
    deadline = time.time() + seconds
    last, routes = None, 0
    while time.time() < deadline:
        version = version_route(scraper=scraper).version
        routes += 1
        if version != last:
            print(json.dumps({"at": time.time(), "version": version, "routes": routes}), flush=True)
            last = version
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
