"""Starts a Celery worker of Trawl: `python -m project.worker OPTIONS` is `celery -A project worker OPTIONS`, the same
command and options (Celery's own `worker` command, on this project's app), without the rest of Celery's command line.

`celery` imports every one of its sub-commands and plugins before it runs one: `amqp`'s shell brings click-repl,
prompt-toolkit, Pygments' lexers and wcwidth, Flower's plugin Tornado and prometheus-client — ~265 modules and
~10 MiB that a worker never runs, held by the worker and by each pool process it forks (bench/README.md, issue 33:
a crawl pool process's memory). It also leaves out the Django apps only beat uses (project/celery.py). The other
commands (`celery -A project beat`, `inspect`, `flower` ...) are unchanged.

A worker of the crawls queue (`-Q crawls`, alone or with others) runs TRAWL_CRAWLS_PER_PROCESS crawls per process
when that is above 1 (project/pools/crawlhost.py): its `-c P` (default: the machine's CPUs) is the number of crawl
processes, and Celery is given P × K slots, which is also what it prefetches. An explicit `-P` (solo, threads ...)
is kept as given; K = 1 is Celery's prefork pool as before.
"""

from __future__ import annotations

import os
import sys

PROGRAM = "python -m project.worker"
CRAWL_HOST_POOL = "project.pools.crawlhost:CrawlHostPool"
CRAWL_QUEUE = "crawls"  # celeryconfig.CRAWL_QUEUE, not imported: that module imports half of the project


def main(argv: list[str] | None = None) -> int:
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    import project.celery
    import project.env

    project.celery.worker_process = True  # before Django is set up: no beat-only apps (project/celery.py)
    app = project.celery.app
    argv = list(sys.argv[1:] if argv is None else argv)
    per_process = project.env.CRAWLS_PER_PROCESS
    if per_process > 1 and serves_crawls(argv) and not _option(argv, "-P", "--pool"):
        argv = crawl_host_args(argv, per_process=per_process)
        app.conf.worker_pool = CRAWL_HOST_POOL  # what `-P prefork`, Celery's default, stands for (celery.bin.worker)
    # As `celery` passes it: the app, and Celery's CELERY_WORKER_* environment variables for the worker's options.
    context = CLIContext(app=app, no_color=bool(os.environ.get("NO_COLOR")), workdir=None, quiet=False)
    return worker.main(args=argv, prog_name=PROGRAM, obj=context, auto_envvar_prefix="CELERY_WORKER")


def serves_crawls(argv: list[str]) -> bool:
    queues = _option(argv, "-Q", "--queues") or ""
    return CRAWL_QUEUE in [name.strip() for name in queues.split(",")]


def crawl_host_args(argv: list[str], *, per_process: int) -> list[str]:
    """The arguments with `-c P` (P crawl processes) turned into Celery's slots, P × crawls per process."""
    processes = int(_option(argv, "-c", "--concurrency") or os.cpu_count() or 1)
    return [*_without(argv, "-c", "--concurrency"), "--concurrency", str(max(1, processes) * per_process)]


def _option(argv: list[str], short: str, long: str) -> str | None:
    """The value of an option given as `-Q v`, `-Qv`, `--queues v` or `--queues=v` (the last one wins)."""
    value = None
    for index, arg in enumerate(argv):
        if arg in (short, long) and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith(f"{long}="):
            value = arg.split("=", 1)[1]
        elif arg.startswith(short) and not arg.startswith("--") and len(arg) > len(short):
            value = arg[len(short) :]
    return value


def _without(argv: list[str], short: str, long: str) -> list[str]:
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in (short, long):
            skip = True
        elif not (arg.startswith(f"{long}=") or (arg.startswith(short) and not arg.startswith("--"))):
            kept.append(arg)
    return kept


if __name__ == "__main__":
    sys.exit(main())
