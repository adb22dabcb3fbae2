"""Starts a Celery worker of Trawl: `python -m project.worker OPTIONS` is `celery -A project worker OPTIONS`, the same
command and options (Celery's own `worker` command, on this project's app), without the rest of Celery's command line.

`celery` imports every one of its sub-commands and plugins before it runs one: `amqp`'s shell brings click-repl,
prompt-toolkit, Pygments' lexers and wcwidth, Flower's plugin Tornado and prometheus-client — ~265 modules and
~10 MiB that a worker never runs, held by the worker and by each pool process it forks (bench/README.md, issue 33:
a crawl pool process's memory). It also leaves out the Django apps only beat uses (project/celery.py). The other
commands (`celery -A project beat`, `inspect`, `flower` ...) are unchanged.
"""

from __future__ import annotations

import os
import sys

PROGRAM = "python -m project.worker"


def main(argv: list[str] | None = None) -> int:
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    import project.celery

    project.celery.worker_process = True  # before Django is set up: no beat-only apps (project/celery.py)
    app = project.celery.app
    # As `celery` passes it: the app, and Celery's CELERY_WORKER_* environment variables for the worker's options.
    context = CLIContext(app=app, no_color=bool(os.environ.get("NO_COLOR")), workdir=None, quiet=False)
    return worker.main(args=argv, prog_name=PROGRAM, obj=context, auto_envvar_prefix="CELERY_WORKER")


if __name__ == "__main__":
    sys.exit(main())
