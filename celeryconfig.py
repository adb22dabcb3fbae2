"""Celery settings for Trawl. Each setting says why it has its value."""

from __future__ import annotations

from kombu import Exchange, Queue

from crawls.timeouts import celery_time_limits
from project import env
from project.messaging.brokers import PRIORITY_STEPS, step_broker_priority

# By default Redis (REDIS_URL) is transport, result store and Trawl's state: one service to run, and results for
# chords live next to the queue. CELERY_BROKER_URL / CELERY_RESULT_BACKEND move either elsewhere (docs/brokers.md).
broker_url = env.CELERY_BROKER_URL
result_backend = env.CELERY_RESULT_BACKEND

# JSON only: task arguments are ids and small dicts, and pickle would let a broker writer run code.
task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
timezone = "UTC"
enable_utc = True

# Crawls, control tasks and webhook deliveries each get a queue so a crawl backlog never delays the others.
CRAWL_QUEUE = "crawls"
CONTROL_QUEUE = "control"
CALLBACK_QUEUE = "callbacks"
# Each queue has its own exchange and key: sharing the default key would copy every message into every queue.
# RabbitMQ orders a queue by priority only when it is declared with x-max-priority (Redis ignores the argument and
# uses priority_steps below); an existing queue declared without it must be deleted once (docs/brokers.md).
task_queues = tuple(
    Queue(name, Exchange(name, type="direct"), routing_key=name, max_priority=PRIORITY_STEPS - 1)
    for name in (CRAWL_QUEUE, CONTROL_QUEUE, CALLBACK_QUEUE)
)
task_default_exchange = CONTROL_QUEUE
task_default_routing_key = CONTROL_QUEUE
task_default_queue = CONTROL_QUEUE
task_routes = {
    "crawls.tasks.run_crawl": {"queue": CRAWL_QUEUE},
    # A replay runs a version's spider in a child process: on the machines that run crawls, not the control queue.
    "crawls.tasks.replay_job": {"queue": CRAWL_QUEUE},
    # Deliveries wait on receivers: their own queue and worker (Procfile's `hooks`), never the control tasks'.
    "callbacks.tasks.deliver": {"queue": CALLBACK_QUEUE},
}

# Ten priority steps (0 = most urgent on Redis, 9 on RabbitMQ: project.messaging.brokers) so job priority 1..100 maps
# onto distinct sub-queues. These options are the Redis transport's; RabbitMQ ignores them (its consumer_timeout plays
# the visibility timeout's part and is set on the server: docs/brokers.md).
broker_transport_options = {
    "priority_steps": list(range(PRIORITY_STEPS)),
    "sep": ":",
    "queue_order_strategy": "priority",
    # Above the crawl hard time limit, or a long crawl's message would be redelivered while it still runs.
    "visibility_timeout": max(3600, env.JOB_TIMEOUT * 2 + 600),
}
result_backend_transport_options = {"retry_policy": {"timeout": 5.0}}
# On Redis a message without priority counts as 0, the most urgent step (on RabbitMQ as the least urgent): give
# everything a middle step by default.
task_default_priority = step_broker_priority(5, url=broker_url)

# A job is acknowledged only when it ends, and requeued if its worker process dies mid-crawl.
task_acks_late = True
task_reject_on_worker_lost = True
# One message per slot: crawls are long, prefetching would starve other workers. A crawl worker's slots are its
# processes times TRAWL_CRAWLS_PER_PROCESS (project/pools/crawlhost.py): a process takes a crawl while it has room.
worker_prefetch_multiplier = 1
# Defaults for tasks published without limits. Crawl messages carry their own, from their job's timeout
# (crawls.publish); the runner stops crawls itself, these only catch a hung process.
task_soft_time_limit, task_time_limit = celery_time_limits(env.JOB_TIMEOUT)
# Recycle children so memory leaked by spiders or the reactor never accumulates. A crawl host process checks its
# memory every 2 s and, past the bound, hands every crawl back and is replaced (project/pools/hosted.py).
worker_max_tasks_per_child = env.WORKER_MAX_TASKS_PER_CHILD
worker_max_memory_per_child = env.WORKER_MAX_MEMORY_KB
# A new pool process starts the reactor and imports Scrapy before it reports up (project/celery.py): seconds on a busy
# machine. Under Celery's 4 s default a loaded host kills every replacement in turn ("Timed out waiting for UP
# message" after a pool process is SIGKILLed), leaving the worker without a pool.
worker_proc_alive_timeout = 60.0
# On SIGTERM give running crawls a moment to finish before the warm shutdown requeues them.
worker_soft_shutdown_timeout = 30.0
worker_enable_soft_shutdown_on_idle = True

# Keep retrying the broker forever: Redis restarts must not kill workers or beat.
broker_connection_retry_on_startup = True
broker_connection_max_retries = None
broker_heartbeat = 10

# Results are small dicts; chords read them, nobody needs them after a day.
result_expires = 86400
# Flower shows task names, arguments and results only when these are on.
result_extended = True
worker_send_task_events = True
task_send_sent_event = True
task_track_started = True

# Schedules live in the database (django-celery-beat) so operators change them in the admin; a Redis lease elects
# one leader among running beats, so a second beat (for availability) never runs a periodic task twice.
beat_scheduler = "crawls.beat:LeaderScheduler"
# Sleep at most this long between schedule checks, so edits in the admin apply quickly.
beat_max_loop_interval = 10

worker_hijack_root_logger = False
