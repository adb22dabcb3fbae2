"""The process a packaged version's crawls run in: `<package env>/bin/python -P -m runtime.packaged.child`.

Started by a worker process (runtime.packaged.run) with the package's environment first on sys.path, so the
spider and the dependency versions it declared are the package's, while Trawl's Scrapy components (throttle,
proxies, User-Agent rotation, Retry-After) and crawl settings are the same as in-process crawls get. It serves one
crawl at a time for as long as its parent keeps sending them, and exits after TRAWL_PACKAGE_CHILD_IDLE_SECONDS
without one, or when its parent goes away (stdin closes). It ignores SIGTERM and SIGINT: a signal to the worker's
process group is the worker's to handle (a warm shutdown hands the crawl back through the job's frontier, which the
child's scheduler shares), and the parent stops or kills the child itself.

It runs uploaded code and is given nothing secret: its environment is an allow-list and its Django settings are
project.settings_child (no database, its own SECRET_KEY, a Redis user of its own), never the project's, whatever
DJANGO_SETTINGS_MODULE says (runtime.packaged.child_env, docs/packages.md).

Commands arrive on stdin, one JSON object per line: `crawl {job, spider, settings, kwargs, project}` (`project`: a
runtime.settings.project.ProjectLayer, the project's settings module beneath the composed settings), `stop {job}`,
`wake {job}` (its items are stored), `check {spider, settings_module}`, `answer {id, value | error}` (to a `call`),
`exit`. Everything it reports goes to the file descriptor in TRAWL_CHILD_FD, one JSON object per line: `item`,
`stats` (every second), `error` (the first spider exception), `log` (a log record of the crawl, at the crawl's
LOG_LEVEL, for the job's log), `store_wanted` (the idle crawl waits for its items to be stored), `screenshot` (one a
rendering crawl took, before its `end`), `error_page` (a response the spider raised on, before its `end`),
`recording` (a part of the crawl's WARC when it records, before its `end`), `end` (final stats, finish reason or
crawl error), `checked` (an error, or the project's spiders by name), `call {id, what, args}` (what Trawl's
components would ask the database, runtime.packaged.child_db). The spider's own prints go to stderr, never into
that channel.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

from runtime.bridge.tracebacks import exception_report, failure_report, item_error_report, spider_error_report
from runtime.packaged.child_db import ParentDatabase

STATS_EVERY = 1.0


class CrawlServer:
    def __init__(self, *, out, reactor, idle_seconds: float) -> None:
        self.out = out
        self.reactor = reactor
        self.idle_seconds = idle_seconds
        self.crawler = None
        self.job = ""
        self.first_error = ""
        self.idle_call = None
        self.stats_loop = None
        self.log_scope = contextlib.ExitStack()
        self.send_lock = threading.Lock()  # log records may come from any thread
        # What Trawl's components would ask the database, asked of the parent (the child has none).
        self.parent_db = ParentDatabase(lambda **fields: self.send("call", job=self.job, **fields))

    def send(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"t": kind, **fields}, default=str) + "\n"
        with self.send_lock:
            self.out.write(line)
            self.out.flush()

    def read_commands(self) -> None:
        """Thread: stdin → the reactor (answers to database calls go straight to the thread waiting for them). EOF
        means the parent is gone: stop."""
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            if command.get("cmd") == "answer":
                self.parent_db.answered(command)
            else:
                self.reactor.callFromThread(self.handle, command)
        self.reactor.callFromThread(self.quit)

    def handle(self, command: dict[str, Any]) -> None:
        kind = command.get("cmd")
        if kind == "crawl":
            self.crawl(command)
        elif kind == "stop" and self.crawler is not None and command.get("job") == self.job:
            from scrapy.utils.defer import deferred_from_coro

            from runtime.bridge.stopping import crawl_stop

            deferred_from_coro(crawl_stop(self.crawler))  # what waits for its download delay is not sent
        elif kind == "wake" and self.crawler is not None and command.get("job") == self.job:
            from runtime.frontier.scheduler import wake_engine

            wake_engine(self.crawler)  # its items are stored: the idle crawl asks its frontier again now
        elif kind == "check":
            error, spiders = spiders_check(command["spider"], settings_module=command.get("settings_module") or "")
            self.send("checked", spider=command["spider"], error=error, spiders=spiders)
        elif kind == "exit":
            self.quit()

    def crawl(self, command: dict[str, Any]) -> None:
        from scrapy import signals

        from registry.spiders import spider_load
        from runtime.bridge.handoff import item_passed
        from runtime.frontier.scheduler import store_wanted
        from runtime.packaged.project_spiders import project_environment
        from runtime.settings.enforced import crawler_create
        from runtime.settings.project import ProjectLayer, project_settings_applied, refused_log

        self._cancel_idle()
        self.job, self.first_error = command["job"], ""
        project = ProjectLayer.of_message(command.get("project"))
        try:
            project_environment(project.module if project else "")
            settings, refused = project_settings_applied(command["settings"], project)
            # Trawl's pins over the package spider's own settings (runtime.settings.enforced), as in a worker.
            runner, crawler = crawler_create(spider_load(command["spider"]), settings)
        except Exception as exc:  # the spider cannot be loaded or built: the job's error, not the child's
            self.send("end", job=self.job, stats={}, reason="", crawl_error=exception_report(exc))
            return self._arm_idle()
        crawler.signals.connect(self.on_item, signal=item_passed, weak=False)
        crawler.signals.connect(self.on_spider_error, signal=signals.spider_error, weak=False)
        crawler.signals.connect(self.on_item_error, signal=signals.item_error, weak=False)
        crawler.signals.connect(self.on_closed, signal=signals.spider_closed, weak=False)
        crawler.signals.connect(self.on_store_wanted, signal=store_wanted, weak=False)
        self.crawler = crawler
        self.closed_stats, self.reason = None, ""
        self._forward_log(level=str(settings.get("LOG_LEVEL") or "INFO"))
        refused_log(project, refused)
        self._start_stats()
        deferred = runner.crawl(crawler, **command["kwargs"])
        deferred.addCallbacks(lambda _: self.finished(""), lambda f: self.finished(failure_report(f)))

    def on_item(self, data: dict[str, Any]) -> None:
        self.send("item", job=self.job, d=data)

    def on_spider_error(self, failure: Any, response: Any, spider: Any) -> None:
        if not self.first_error:
            self.first_error = spider_error_report(failure, response)
            self.send("error", job=self.job, d=self.first_error)

    def on_item_error(self, item: Any, response: Any, spider: Any, failure: Any) -> None:
        if not self.first_error:
            self.first_error = item_error_report(failure, response)
            self.send("error", job=self.job, d=self.first_error)

    def on_store_wanted(self) -> None:
        """The crawl is idle until the items it wrote ahead are stored: the parent stores them now, not at its tick."""
        self.send("store_wanted", job=self.job)

    def on_closed(self, spider: Any, reason: str) -> None:
        self.closed_stats, self.reason = dict(self.crawler.stats.get_stats()), reason

    def finished(self, crawl_error: str) -> None:
        stats: dict[str, Any] = {}
        try:  # whatever goes wrong here, the parent must hear the end: else its job waits for ever
            if self.stats_loop is not None and self.stats_loop.running:
                self.stats_loop.stop()
            self._send_screenshots()
            self._send_kept()
            stats = self.closed_stats if self.closed_stats is not None else self._stats()
            if self.reason:
                stats["finish_reason"] = self.reason  # Scrapy sets it after spider_closed handlers ran
            self.log_scope.close()
        finally:
            self.send("end", job=self.job, stats=stats, reason=self.reason, crawl_error=crawl_error)
            self.crawler = None
            self._arm_idle()

    def _send_screenshots(self) -> None:
        """What a rendering crawl took (its failures, the first pages it was asked for), before `end`: the worker
        stores them with the job as it does an in-process crawl's (crawls/services/execution.py)."""
        from runtime.rendering.screenshots import screenshot_fields, screenshots_drain

        for shot in screenshots_drain(self.crawler):
            self.send("screenshot", job=self.job, **screenshot_fields(shot))

    def _send_kept(self) -> None:
        """The responses the spider raised on and the crawl's recording, before `end`: the worker stores them with the
        job (runtime/watch/error_pages.py, runtime/replay/record.py)."""
        from runtime.replay.record import recording_drain, recording_parts
        from runtime.watch.error_pages import error_page_fields, error_pages_drain

        for page in error_pages_drain(self.crawler):
            self.send("error_page", job=self.job, **error_page_fields(page))
        recording = recording_drain(self.crawler)
        for part in recording_parts(recording) if recording is not None else ():
            self.send("recording", job=self.job, **part)

    def _forward_log(self, *, level: str) -> None:
        """The crawl's log records go to the worker, which writes them into the job's log (bridge.logcapture)."""
        from runtime.bridge.logcapture import job_log_level, log_handler_installed

        self.log_scope.enter_context(log_handler_installed(LogForwarder(self, job=self.job)))
        job_log_level(level=level)

    def _stats(self) -> dict[str, Any]:
        # `_stats`, not `stats`: a spider that raised before its crawl started leaves it unset, and Scrapy's `stats`
        # raises then — which would lose the `end` message and leave the job running.
        stats = getattr(self.crawler, "_stats", None)
        return dict(stats.get_stats()) if stats is not None else {}

    def _start_stats(self) -> None:
        from twisted.internet.task import LoopingCall

        self.stats_loop = LoopingCall(lambda: self.send("stats", job=self.job, d=self._stats()))
        self.stats_loop.start(STATS_EVERY, now=False)

    def _arm_idle(self) -> None:
        self.idle_call = self.reactor.callLater(self.idle_seconds, self.quit)

    def _cancel_idle(self) -> None:
        if self.idle_call is not None and self.idle_call.active():
            self.idle_call.cancel()
        self.idle_call = None

    def quit(self) -> None:
        if self.reactor.running:
            self.reactor.stop()


class LogForwarder(logging.Handler):
    def __init__(self, server: CrawlServer, *, job: str) -> None:
        super().__init__()
        self.server, self.job = server, job

    def emit(self, record: logging.LogRecord) -> None:
        try:
            exc_text = record.exc_text or ""
            if record.exc_info and not exc_text:
                exc_text = logging.Formatter().formatException(record.exc_info)
            fields = {"name": record.name, "levelno": record.levelno, "levelname": record.levelname}
            message = {**fields, "msg": record.getMessage(), "created": record.created, "exc_text": exc_text}
            self.server.send("log", job=self.job, d=message)
        except Exception:  # a record that cannot be sent must not break the crawl that logged it
            self.handleError(record)


def spiders_check(path: str, *, settings_module: str = "") -> tuple[str, dict[str, str]]:
    """Why the version's spider (`path`) or its project's spiders cannot be loaded ("" when they can), and the
    project's spiders by name (runtime.packaged.project_spiders)."""
    from project.errors import TrawlError
    from runtime.packaged.project_spiders import project_environment, spiders_found

    try:
        project_environment(settings_module)  # a spider module may read the project's settings as it is imported
        return "", spiders_found(path, settings_module=settings_module)
    except TrawlError as exc:
        return exc.message, {}
    except Exception as exc:  # importing user code can raise anything
        return f"cannot import {path!r} or the project's spiders: {type(exc).__name__}: {exc}", {}


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    from project.env import BASE_DIR
    from runtime.packaged.project_names import project_names_first

    project_names_first(BASE_DIR)  # before anything imports the project's code
    out = os.fdopen(int(os.environ["TRAWL_CHILD_FD"]), "w", buffering=1)
    os.dup2(2, 1)  # the spider's prints must never reach the message channel
    sys.stdout = sys.stderr
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    # Never the project's settings, whatever the environment says: they hold the worker's secrets and database.
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings_child"
    import django

    django.setup()
    from twisted.internet import reactor

    server = CrawlServer(out=out, reactor=reactor, idle_seconds=float(os.environ["TRAWL_CHILD_IDLE_SECONDS"]))
    server.parent_db.install()
    threading.Thread(target=server.read_commands, name="commands", daemon=True).start()
    from runtime.bridge.reactor import preload_components, tune_gc

    preload_components(spiders=False)  # it crawls with its package's spider, never Trawl's
    tune_gc()
    reactor.callWhenRunning(server.send, "ready", pid=os.getpid())
    reactor.callWhenRunning(server._arm_idle)
    reactor.run(installSignalHandlers=False)


if __name__ == "__main__":
    main()
