"""A replay's child process: `python -m runtime.replay.child TASK.json RESULT.json`.

It runs one version's spider against a recording with no network at all: before any of the version's code is
imported, an audit hook (sys.addaudithook, which nothing can remove) refuses every Internet socket's connect, send
and name lookup, and notes it; the parent fails a replay that tried (crawls/replays/runs.py). A process of its
own, because the hook is for good and a worker's other crawls need the network. No Django, no Trawl Redis: the
crawl runs on Scrapy's own components and the version's, served by runtime.replay.serve. A packaged version's
replay runs this module with its environment's Python (crawls/replays/runs.py), its project's settings beneath.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Any

NETWORK_EVENTS = ("socket.connect", "socket.sendto", "socket.getaddrinfo", "socket.gethostbyname")
INTERNET = (socket.AF_INET, socket.AF_INET6)
attempts: list[str] = []


def refuse_network(event: str, args: tuple) -> None:
    if event not in NETWORK_EVENTS:
        return
    if event in ("socket.connect", "socket.sendto"):
        sock = args[0]
        if getattr(sock, "family", None) not in INTERNET:
            return  # the reactor's own wake-up pipe (AF_UNIX socketpair)
        target = args[-1]
    else:
        target = args[0]
    attempts.append(f"{event} {target!r}"[:300])
    raise OSError(f"a replay opens no socket ({event} {target!r})")


def run(task: dict[str, Any]) -> dict[str, Any]:
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.misc import load_object

    items: list[dict[str, Any]] = []
    errors: list[str] = []
    process = CrawlerProcess(with_project(task["settings"], task.get("project")), install_root_handler=True)
    crawler = process.create_crawler(load_object(task["spider"]))

    def item_scraped(item: Any, response: Any, spider: Any) -> None:
        from itemadapter import ItemAdapter

        items.append(json.loads(json.dumps(ItemAdapter(item).asdict(), default=str)))

    def spider_error(failure: Any, response: Any, spider: Any) -> None:
        errors.append(f"{getattr(response, 'url', '')}: {failure.type.__name__}: {failure.value}"[:500])

    crawler.signals.connect(item_scraped, signal=signals.item_scraped)
    crawler.signals.connect(spider_error, signal=signals.spider_error)
    started = time.monotonic()
    process.crawl(crawler, **task["spider_kwargs"])
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    return {
        "items": items,
        "errors": errors,
        "network": list(attempts),
        "pages": int(stats.get("response_received_count", 0)),
        "served": int(stats.get("replay/served", 0)),
        "not_recorded": int(stats.get("replay/not_recorded", 0)),
        "seconds": time.monotonic() - started,
        "finish_reason": str(stats.get("finish_reason", "")),
    }


def with_project(settings: dict[str, Any], project: dict[str, Any] | None) -> dict[str, Any]:
    """A packaged version's project settings module beneath the replay's settings, as for its crawls
    (runtime.settings.project; imported here, after the audit hook: the module is the package's code)."""
    from runtime.settings.project import ProjectLayer, project_settings_applied

    return project_settings_applied(settings, ProjectLayer.of_message(project))[0]


def main() -> None:
    task_path, result_path = sys.argv[1], sys.argv[2]
    with open(task_path) as handle:
        task = json.load(handle)
    sys.addaudithook(refuse_network)
    result = run(task)
    with open(result_path, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
