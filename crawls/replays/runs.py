"""Replaying a recorded job with a version: its spider runs in a child process against the recording, with no
network (runtime/replay/child.py), and its items are compared per field with those the recorded job kept
(runtime/replay/diff.py). A replay that tried to open a socket, raised, or could not run is `failed`.

A packaged version's child is its environment's Python, with its project's settings module beneath the settings:
it runs uploaded code, so what it reports is read as bounded JSON and checked (runtime/replay/result.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crawls.models import CrawlJob, JobRecording, JobReplay
from crawls.publish import publish_replay
from crawls.services.crawl_spec import crawl_spec_build, spider_kwargs
from project.errors import TrawlError
from registry.models import ScraperVersion
from registry.packages.envs import EnvBuildError, env_lease
from runtime.replay.diff import items_diff
from runtime.replay.result import replay_result_read
from runtime.replay.serve import SERVER, SERVER_ORDER, WARC_SETTING
from runtime.settings.compose import project_layer_for, with_trawl_defaults

BASE_DIR = Path(__file__).resolve().parents[2]


def job_replay_create(*, job: CrawlJob, version: str, publish: bool = True) -> JobReplay:
    """A replay of `job` by `version` of its scraper, queued (published on commit). TrawlError naming the field when
    the job has no recording or the scraper no such version."""
    if not JobRecording.objects.filter(job=job).exists():
        raise TrawlError("this job was not recorded (submit it with the option `record: true`)", field="job")
    found = ScraperVersion.objects.filter(scraper=job.scraper, version=version).first()
    if found is None:
        raise TrawlError(f"{job.scraper.name} has no version {version!r}", field="version")
    with transaction.atomic():
        replay = JobReplay.objects.create(job=job, version=found)
        if publish:
            transaction.on_commit(lambda: publish_replay(replay_id=replay.pk))
    return replay


def job_replay_run(*, replay: JobReplay) -> JobReplay:
    """Run the replay now (in this process's child) and store its report."""
    JobReplay.objects.filter(pk=replay.pk).update(status=JobReplay.Status.RUNNING)
    recordings = list(JobRecording.objects.filter(job=replay.job).order_by("shard"))
    recorded_items = [item for recording in recordings for item in recording.items]
    try:
        result = _child_run(replay, warc=b"".join(bytes(recording.warc) for recording in recordings))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return _finished(replay, JobReplay.Status.FAILED, {}, f"the replay could not run: {exc}")
    report = {
        **items_diff(recorded_items, result["items"]),
        "pages": result["pages"],
        "not_recorded": result["not_recorded"],
        "network": result["network"],
        "errors": result["errors"][:20],
        "seconds": round(result["seconds"], 3),
        "truncated_recording": any(recording.truncated for recording in recordings),
    }
    if result["network"]:
        return _finished(replay, JobReplay.Status.FAILED, report, f"the replay opened a socket: {result['network'][0]}")
    if result["errors"]:
        return _finished(replay, JobReplay.Status.FAILED, report, f"the spider raised: {result['errors'][0]}")
    status = JobReplay.Status.CLEAN if report["clean"] else JobReplay.Status.DIFFERENT
    return _finished(replay, status, report, "")


def replay_settings(*, job: CrawlJob, version: ScraperVersion, warc_path: str) -> dict[str, Any]:
    """The child's Scrapy settings: the project's, the scraper's and the version's with Trawl's knobs; served from
    the recording, with none of Trawl's components (no throttle, no frontier, no Redis), no feeds, no delay."""
    spec = crawl_spec_build(job=job, version=version)
    merged = with_trawl_defaults(
        {**settings.TRAWL_SCRAPY_SETTINGS, **spec.scraper_settings, **spec.version_settings, **_job_knobs(spec)}
    )
    merged["DOWNLOADER_MIDDLEWARES"] = {**dict(merged.get("DOWNLOADER_MIDDLEWARES") or {}), SERVER: SERVER_ORDER}
    merged.update(
        {
            WARC_SETTING: warc_path,
            "TELNETCONSOLE_ENABLED": False,
            "FEEDS": {},
            "DOWNLOAD_DELAY": 0,
            "AUTOTHROTTLE_ENABLED": False,
            "HTTPCACHE_ENABLED": False,
            "LOG_LEVEL": "WARNING",
            # Answers come from memory at once: more requests at a time keep the reactor busy, not a site.
            "CONCURRENT_REQUESTS": max(64, int(merged.get("CONCURRENT_REQUESTS") or 0)),
            "CONCURRENT_REQUESTS_PER_DOMAIN": max(64, int(merged.get("CONCURRENT_REQUESTS_PER_DOMAIN") or 0)),
            "TRAWL_RECORD": False,
        }
    )
    return merged


def _job_knobs(spec: Any) -> dict[str, Any]:
    """What the recorded job's options set for its crawl that its spider reads (its size bounds)."""
    knobs = {}
    if spec.options.get("max_pages"):
        knobs["CLOSESPIDER_PAGECOUNT"] = int(spec.options["max_pages"])
    if spec.options.get("max_items"):
        knobs["CLOSESPIDER_ITEMCOUNT"] = int(spec.options["max_items"])
    return knobs


def _child_run(replay: JobReplay, *, warc: bytes) -> dict[str, Any]:
    job, version = replay.job, replay.version
    spec = crawl_spec_build(job=job, version=version)
    project = project_layer_for(spec=spec)
    with tempfile.TemporaryDirectory(prefix="trawl-replay-") as tmp, _python_of(spec) as python:
        warc_path, task_path, result_path = (Path(tmp) / name for name in ("job.warc.gz", "task.json", "result.json"))
        warc_path.write_bytes(warc)
        task = {
            "spider": spec.spider,
            "settings": replay_settings(job=job, version=version, warc_path=str(warc_path)),
            "spider_kwargs": spider_kwargs(job, args=dict(job.args or {})),
            "project": project.message() if project is not None else None,
        }
        task_path.write_text(json.dumps(task, default=str))
        done = subprocess.run(
            [python, "-P", "-m", "runtime.replay.child", str(task_path), str(result_path)],
            cwd=tmp,  # what the version's code writes where it stands goes with the replay (PackageEnv.workdir_made)
            env=_child_env(),
            capture_output=True,
            text=True,
            timeout=settings.TRAWL_REPLAY_TIMEOUT,
        )
        if done.returncode != 0 or not result_path.exists():
            raise ValueError(f"exit {done.returncode}: {done.stderr.strip()[-2000:]}")
        return replay_result_read(result_path)


@contextlib.contextmanager
def _python_of(spec: Any) -> Iterator[str]:
    """The Python the replay's child runs: this one for an in-process version; a packaged version's own environment
    (built first if this machine has none), whose lock is held while the child runs, as for its crawls."""
    if spec.package is None:
        yield sys.executable
        return
    try:
        env, lock_fd = env_lease(package=spec.package)
    except EnvBuildError as exc:
        raise ValueError(f"the environment of {spec.package} does not build here: {exc.message}") from None
    try:
        yield str(env.python)
    finally:
        os.close(lock_fd)


def _child_env() -> dict[str, str]:
    """Nothing of Trawl's environment (database, Redis, secrets) reaches the version's code."""
    kept = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONHASHSEED")
    return {**{name: os.environ[name] for name in kept if name in os.environ}, "PYTHONPATH": str(BASE_DIR)}


def _finished(replay: JobReplay, status: str, report: dict[str, Any], error: str) -> JobReplay:
    replay.status, replay.report, replay.error, replay.finished_at = status, report, error, timezone.now()
    replay.save(update_fields=["status", "report", "error", "finished_at"])
    return replay
