"""Trawl's settings of the control plane (TRAWL_*): batches and webhooks, the scraper registry, operations, scheduling
and the reaper. Part of project.settings, which imports them all after project.trawl_settings (the crawl's)."""

from __future__ import annotations

from project import env

# --- Batches and webhooks --------------------------------------------------------------------------
# Round-robin between requesters at one priority: a crawl message is a worker slot that runs the owed requester's
# next job (crawls/fairshare.py, docs/fair-share.md). False: jobs start in submission order within a priority.
TRAWL_FAIR_SHARE = True
# Cap on the active shards (queued + running; a job with parallelism N counts N) of a requester whose own
# max_active_jobs is empty; admins and scheduled work are not capped by it; 0 turns it off. 100: about three times
# the widest single job (parallelism 32), more than a cluster of a few dozen worker slots runs at once, so an honest
# requester waits on the workers, not on the cap, while one token can no longer queue without bound (a batch of
# TRAWL_BATCH_MAX_JOBS is for requesters an admin trusted with a higher cap).
TRAWL_DEFAULT_MAX_ACTIVE_JOBS = env.DEFAULT_MAX_ACTIVE_JOBS
TRAWL_BATCH_MAX_JOBS = env.BATCH_MAX_JOBS  # job specs one POST /api/batches/ may carry
# A batch still `pending` this long after submission (its launcher task was lost) is launched again by the sweeper.
TRAWL_BATCH_LAUNCH_GRACE_SECONDS = env.BATCH_LAUNCH_GRACE_SECONDS
# Backstop for lost workers: a running batch job whose heartbeat is this old is ended `dead` (worker_lost) by the
# batch sweeper so its batch can still complete. Far above the heartbeat; the job reaper should act well before.
TRAWL_BATCH_JOB_LOST_SECONDS = env.BATCH_JOB_LOST_SECONDS
TRAWL_WEBHOOK_MAX_ATTEMPTS = env.WEBHOOK_MAX_ATTEMPTS  # then the delivery is `dead`
TRAWL_WEBHOOK_BACKOFF_SECONDS = env.WEBHOOK_BACKOFF_SECONDS  # first retry after about this; doubles each attempt
# Cap on one wait; below the broker visibility timeout (1 h), or a retry held by a worker would be redelivered.
TRAWL_WEBHOOK_BACKOFF_MAX_SECONDS = env.WEBHOOK_BACKOFF_MAX_SECONDS
TRAWL_WEBHOOK_TIMEOUT_SECONDS = env.WEBHOOK_TIMEOUT_SECONDS  # connect timeout, and each read's, of one POST
# The whole POST (connect, send, the complete answer) ends by then: a receiver dripping a byte every few seconds
# never resets it, so one delivery holds a callbacks process for this long at most (callbacks/transport.py).
TRAWL_WEBHOOK_DEADLINE_SECONDS = env.WEBHOOK_DEADLINE_SECONDS
# A delivery due this long ago whose task never ran (lost message, dead worker) is published again by the sweeper.
TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS = env.WEBHOOK_SWEEP_GRACE_SECONDS
TRAWL_WEBHOOK_LINK_BASE_URL = env.PUBLIC_URL  # where this API is reached: base of `items_url` in payloads

# --- Scraper registry: routing cache and automatic rollback (see docs/registry.md) -------------------------
# How often a process asks Redis whether the registry changed (one GET) before trusting its cached versions.
# 0 = before every route: a change applies to the very next job anywhere. Raise it to trade freshness for GETs.
TRAWL_ROUTING_CHECK_SECONDS = 0.0
# Backstop only, not the invalidation: bounds how long a write that bumped nothing (QuerySet.update in a shell) is
# unseen. Every write through services, admin, API or model save() invalidates every process within the check above.
TRAWL_ROUTING_CACHE_MAX_AGE = 300
TRAWL_ROLLBACK_ENABLED = True
# A canary/beta is judged once it has run this many jobs in its current rollout (per scraper: settings override).
TRAWL_ROLLBACK_MIN_JOBS = 20
# ...and rolled back (traffic -> 0) when its failure rate exceeds stable's by more than this (0.2 = 20 points).
TRAWL_ROLLBACK_THRESHOLD = 0.2
# Where `scraper.rolled_back` events go ("" = nowhere), signed with this requester's webhook secret.
TRAWL_ROLLBACK_WEBHOOK_URL = ""
TRAWL_ROLLBACK_WEBHOOK_REQUESTER = ""

# --- Operations: stats counters, /metrics, the admin dashboard (see docs/operations.md) -------------------
# Redis keys of the counters, queue samples and the last worker answer; empty: redis_key("stats"), this installation's
TRAWL_STATS_PREFIX = ""
TRAWL_STATS_WINDOWS = (900, 3600, 86400)  # rolling windows of /api/stats/ (seconds; whole minutes), plus lifetime
# A domain's lifetime counters (/api/stats/, /metrics) are forgotten once nobody crawled it for this long (seconds),
# so that Redis holds the sites crawled recently, not every site ever crawled.
TRAWL_STATS_DOMAIN_TTL = 30 * 86400
# Job duration histogram buckets of /metrics (seconds; +Inf is added).
TRAWL_STATS_DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
TRAWL_STATS_SAMPLE_SECONDS = 30  # beat's queue-depth/worker sample (the `ops-sample` periodic task's interval)
TRAWL_STATS_QUEUE_SAMPLES_KEPT = 2880  # a day of samples at 30 s
TRAWL_PRESENCE_SECONDS = 10  # how often a worker node writes its presence (project/presence.py); gone after 3 misses
TRAWL_STATS_WORKERS_SECONDS = 86400  # a node that ran a job this recently is listed among the workers seen
TRAWL_STATS_DASHBOARD_MINUTES = 60  # the dashboard's jobs-per-minute chart
TRAWL_STATS_DASHBOARD_SAMPLES = 120  # queue-depth samples the dashboard draws (an hour at 30 s)
# /metrics is never open: a scrape sends `Bearer <token>` (or `Token <token>`) with this token or an admin API token.
TRAWL_STATS_METRICS_TOKEN = env.STATS_METRICS_TOKEN
TRAWL_METRICS_MAX_DOMAINS = 50  # /metrics labels the busiest domains; the rest are summed under domain="other"

# --- Scheduling: dispatching due sources, adaptive intervals, backoff (see docs/scheduling.md) ------------
# A dispatcher that died frees its Redis lease after this long; a live one renews it after every chunk.
TRAWL_SCHEDULING_LEASE_SECONDS = 60
# The beat leader's Redis lease: a standby beat takes over at most this long after the leader died.
TRAWL_BEAT_LEASE_SECONDS = 30
TRAWL_SCHEDULING_DISPATCH_CHUNK = 500  # sources booked (and their jobs published) per transaction
TRAWL_SCHEDULING_DISPATCH_MAX = 10_000  # sources booked per pass; any more wait for the next minute
# A run "changed much" when at least this fraction of what it saw was new or changed: interval back to min.
TRAWL_SCHEDULING_MANY_CHANGES = 0.25
TRAWL_SCHEDULING_BACKOFF = (3600, 4 * 3600, 24 * 3600)  # after the 1st, 2nd, 3rd+ network error or block in a row
TRAWL_SCHEDULING_MAX_RETRY_AFTER = 7 * 86400  # a site's Retry-After is honoured up to this long
TRAWL_SCHEDULING_MIN_INTERVAL = 60  # shortest interval a source may ask for: beat dispatches once a minute
TRAWL_SCHEDULING_DISCOVERY_MAX = 50_000  # sources one discovery job may create

# --- Reliability: the job reaper (see docs/failure-handling.md) -----------------------------------------
# Beat runs `reap-dead-jobs` this often (the periodic task's interval when it is first created).
TRAWL_REAPER_INTERVAL_SECONDS = env.REAPER_INTERVAL_SECONDS
# A running job with no heartbeat for this long lost its worker: requeued (attempt + 1) or, after its last attempt,
# ended `dead` (worker_lost). A few heartbeats, far below TRAWL_BATCH_JOB_LOST_SECONDS and the visibility timeout.
TRAWL_REAPER_STALE_SECONDS = env.REAPER_STALE_SECONDS
# A job queued this long without a claim is published again (its message may be lost); at most once per this long.
TRAWL_REAPER_QUEUED_SECONDS = env.REAPER_QUEUED_SECONDS
TRAWL_REAPER_MAX_PER_PASS = 500  # jobs requeued/republished per pass; the rest wait for the next one
