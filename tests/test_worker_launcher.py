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


def test_a_crawls_worker_gets_the_crawl_host_pool_with_p_times_k_slots():
    from project.worker import crawl_host_args, serves_crawls

    assert serves_crawls(["-Q", "crawls", "-c", "2"]) and serves_crawls(["--queues=control,crawls"])
    assert serves_crawls(["-Qcrawls"]) and not serves_crawls(["-Q", "control,callbacks"]) and not serves_crawls([])
    # `-c P` is P crawl processes: Celery's slots (and prefetch) are P × crawls per process.
    assert crawl_host_args(["-Q", "crawls", "-c", "2", "-n", "crawl@%h"], per_process=16) == [
        "-Q",
        "crawls",
        "-n",
        "crawl@%h",
        "--concurrency",
        "32",
    ]
    assert crawl_host_args(["-Q", "crawls", "--concurrency=3"], per_process=4)[-2:] == ["--concurrency", "12"]
