"""`python -m project.worker` is `celery -A project worker` without the rest of Celery's command line. Every test worker
starts through it (tests/workers.py); here, what it leaves out."""

from __future__ import annotations

from tests.workers import last_json_line, script_run

# Celery's command line imports these for `celery amqp`'s shell and Flower's plugin; a worker runs neither.
NOT_IN_A_WORKER = ("click_repl", "prompt_toolkit", "flower", "tornado", "prometheus_client", "wcwidth")

HELP = """
import contextlib, io, json, sys
from project import worker

out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        worker.main(["--help"])
    except SystemExit as exit:
        code = exit.code
loaded = sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1].split(",")))
print(json.dumps({"code": code, "help": out.getvalue(), "loaded": loaded}))
"""


def test_the_worker_launcher_takes_celery_worker_s_options_without_its_shell_or_flower():
    done = script_run(HELP, ",".join(NOT_IN_A_WORKER))

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    assert report["code"] == 0
    assert "--queues" in report["help"] and "--concurrency" in report["help"]  # Celery's own `worker` command
    assert report["loaded"] == []
