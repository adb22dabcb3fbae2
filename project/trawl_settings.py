"""Trawl's own settings (TRAWL_*): part of project.settings, which imports them all; kept apart so that each module
reads in one sitting. Values that differ between machines come from project.env."""

from __future__ import annotations

from project import env
from project.net.dns_servers import parse_servers

# --- Trawl ---------------------------------------------------------------------------------------
# Trawl's own Redis or database away during a crawl: the crawl waits and retries this long, then the job is requeued.
# Never a site's error class, never the source's backoff.
TRAWL_INFRA_PATIENCE_SECONDS = env.INFRA_PATIENCE_SECONDS
# A crawl process whose reactor thread has not answered this long while it holds a crawl hands its crawls back and is
# replaced (runtime.bridge.watchdog). Far above what a loaded machine delays the reactor by (a page parsed, a tick
# held: under a second), far below a job's timeout. 0 turns the watchdog off.
TRAWL_REACTOR_STALL_SECONDS = env.REACTOR_STALL_SECONDS
# Crawls a crawl worker process runs at once (project/pools/crawlhost.py, chosen by project/worker.py); 1: prefork.
TRAWL_CRAWLS_PER_PROCESS = env.CRAWLS_PER_PROCESS
TRAWL_JOB_TIMEOUT = env.JOB_TIMEOUT  # seconds a crawl may run before it is stopped and failed with `timeout`
TRAWL_HEARTBEAT_SECONDS = env.HEARTBEAT_SECONDS
TRAWL_EGRESS_LABEL = env.EGRESS_LABEL
TRAWL_EGRESS_SHARED = env.EGRESS_SHARED
TRAWL_DEFAULT_SCRAPER = "link"
TRAWL_ITEM_CHUNK = 200  # items upserted per database round
# Scrapy settings every crawl starts from; scraper, version and job settings override them in that order.
TRAWL_SCRAPY_SETTINGS = {
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    "ROBOTSTXT_OBEY": True,
    # What a job's own log keeps (GET /api/jobs/{id}/log/); a scraper or version may set another level.
    "LOG_LEVEL": "INFO",
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "DOWNLOAD_TIMEOUT": 30,
    # A requester's own site decides how big its pages are, and the reactor parses each under the GIL: Scrapy's 1 GiB
    # default would let one page hold a worker for minutes. A scraper or version that fetches big files raises it.
    "DOWNLOAD_MAXSIZE": 32 * 1024 * 1024,
    "DOWNLOAD_WARNSIZE": 8 * 1024 * 1024,
    "RETRY_TIMES": 1,
    # Scrapy's default of 100 concurrent item tasks per response costs CPU for nothing with dict items.
    "CONCURRENT_ITEMS": 10,
    "USER_AGENT": "Trawl/0.1 (+https://github.com/trawl)",
    "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    # Scrapy's own collector without its per-call deprecation check (runtime/bridge/stats.py).
    "STATS_CLASS": "runtime.bridge.stats.CrawlStats",
    # CSV feeds escape cells a spreadsheet would run as formulas (runtime/items/csv_feeds.py).
    "FEED_EXPORTERS": {"csv": "runtime.items.csv_feeds.SafeCsvItemExporter"},
}
# The runner adds its own components through these so user settings never drop them by accident.
TRAWL_SCRAPY_EXTENSIONS: dict[str, int] = {
    # Records the longest Retry-After a site sent, so the source's next run honours it (docs/scheduling.md).
    "runtime.watch.retry_after.RetryAfterStats": 0,
    # Stops a crawl that got no response and no item for TRAWL_STALL_SECONDS (error class `stalled`).
    "runtime.watch.watchdogs.StallWatchdog": 0,
    # Stops a crawl whose error rate passed its TRAWL_MONITORS max_error_rate; counts field coverage for monitors.
    "runtime.watch.watchdogs.ErrorRateWatchdog": 0,
    "runtime.watch.watchdogs.FieldCoverage": 0,
    # Counts the exceptions item pipelines raise (Scrapy counts only a callback's): both count towards
    # TRAWL_MAX_SPIDER_ERRORS.
    "runtime.watch.item_errors.ItemErrorStats": 0,
    # Scrapy logs every feed's URI: credentials in it (s3://KEY:SECRET@...) are redacted (runtime/settings/feeds.py).
    "runtime.settings.feeds.FeedLogRedaction": 0,
    # Keeps the response that made the spider's callback raise (bounded), linked from the log (docs/operations.md).
    "runtime.watch.error_pages.ErrorPages": 0,
}
TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES: dict[str, int] = {
    # Before Scrapy's UserAgentMiddleware (500), which only fills in a User-Agent when none is set.
    "throttling.middlewares.UserAgentRotationMiddleware": 490,
    # Before HttpProxyMiddleware (750), which applies the chosen proxy; sets the egress label the throttle keys on.
    "throttling.proxies.ProxyRotationMiddleware": 740,
    # Last before DownloaderStats (850): the token is taken as close to the request leaving as middlewares allow.
    "throttling.middlewares.ThrottleMiddleware": 800,
    # Just above Scrapy's RetryMiddleware (550): a page the site refused for overload goes back to the frontier with
    # the adaptive controller's delay before Scrapy's immediate retries see it (docs/throttling.md).
    "throttling.requeue.PoliteRequeueMiddleware": 560,
    # Source crawls revalidate what they fetched before (ETag / Last-Modified); below DownloaderStats so a job's
    # bytes are what came over the wire. Off for ad-hoc jobs and with TRAWL_INCREMENTAL: false (docs/incremental.md).
    "runtime.incremental.cache.IncrementalCacheMiddleware": 840,
    # First to see each response (after the downloader), before retries and redirects: counts 403/429 and captchas.
    "runtime.watch.blocks.BlockDetector": 880,
    # First to see a failed download: one that failed because Trawl's own Redis or database was away stays in the
    # job's frontier and stops the crawl, to be fetched by the next attempt (runtime/watch/outages.py).
    "runtime.watch.outages.OutageGuard": 890,
    # After robots.txt (100), before the throttle: a job's `max_pages` lets no request past its budget leave, not even
    # one Scrapy's CloseSpider would let finish (runtime/watch/budget.py).
    "runtime.watch.budget.PageBudget": 120,
    # Closest to the downloader: with TRAWL_RECORD (option `record`) keeps each response as WARC (runtime/replay).
    "runtime.replay.record.ResponseRecorder": 960,
}
# Incremental source crawls: on unless a scraper, version or source says TRAWL_INCREMENTAL: false. Stored pages and
# sitemap lastmods live in Redis this long after their last use (seconds).
TRAWL_INCREMENTAL = True
TRAWL_INCREMENTAL_TTL = 30 * 86400

# --- Throttling (see docs/throttling.md) ------------------------------------------------------------
TRAWL_THROTTLE_ENABLED = True
# Buckets of a domain no DomainThrottle row names: requests per second and burst, cluster-wide and per egress IP.
TRAWL_THROTTLE_DEFAULTS = {
    "rate": env.THROTTLE_DEFAULT_RATE,
    "burst": env.THROTTLE_DEFAULT_BURST,
    "ip_rate": env.THROTTLE_DEFAULT_RATE,
    "ip_burst": env.THROTTLE_DEFAULT_BURST,
    # Requests in flight at once to a domain across every shard and worker (Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN
    # is per process: 32 shards would open 32 x 8 connections without it).
    "concurrency": env.THROTTLE_DEFAULT_CONCURRENCY,
}
# How long a worker's hold on in-flight slots lasts without renewal (it renews a third of this): a killed worker's
# slots come back within this many seconds.
TRAWL_THROTTLE_SLOT_LEASE = env.THROTTLE_SLOT_LEASE
# Adaptive politeness (docs/throttling.md): every worker's response latencies and errors per domain feed one controller
# in Redis that lowers the domain's rate when the site slows or errors and raises it back slowly. Rules opt out with
# `adaptive: false`; "enabled": False turns it off everywhere. Other keys override throttling.adaptive.AdaptiveConfig.
TRAWL_THROTTLE_ADAPTIVE: dict = {"enabled": True}
# Longest single sleep before asking Redis again, so a rate raised in the admin applies to waiting requests at once.
TRAWL_THROTTLE_MAX_SLEEP = 1.0
# Longest pause a site's Retry-After may impose on its domain (seconds).
TRAWL_THROTTLE_MAX_PAUSE = 3600
# Seconds the Redis mirror of the rules is trusted before a worker reloads it from the database. Services publish
# every change at once; this only bounds how long a change made behind their back (shell, fixture) goes unseen.
TRAWL_THROTTLE_RULES_TTL = 15
# Seconds what a site's robots.txt asks for (Crawl-delay / Request-rate) is kept in Redis for every worker after a
# crawl read it: the longest a changed robots.txt goes unnoticed by crawls that do not read it themselves.
TRAWL_THROTTLE_ROBOTS_TTL = env.THROTTLE_ROBOTS_TTL
# Proxy and User-Agent rotation: a scraper or version may override any of these in its Scrapy settings.
TRAWL_PROXY_ENABLED = True
TRAWL_PROXY_GROUP = ""  # "" is the pool of proxies without a group; a source's config `proxy_group` picks another
TRAWL_PROXY_GROUPS_PUBLIC: list[str] = env.PROXY_GROUPS_PUBLIC  # groups a requester's job may name; admins: any
TRAWL_PROXY_COOLDOWN = 600  # seconds a proxy rests after a site blocked it
TRAWL_PROXY_BAN_STATUSES = [403, 429]
TRAWL_PROXY_BAN_MARKERS = ["g-recaptcha", "h-captcha", "cf-challenge", "captcha-delivery", "are you a robot"]
# Captcha/challenge markers checked in every response (runtime.watch.blocks); a scraper or version may set its own.
TRAWL_BLOCK_MARKERS = TRAWL_PROXY_BAN_MARKERS
# A crawl whose responses were at least this share of blocks (403, 429, captcha pages) ends `blocked`.
TRAWL_BLOCK_SHARE = 0.5
TRAWL_PROXY_REFRESH_SECONDS = 10  # how often a crawl re-reads the proxy table (other workers' cool-downs, edits)
TRAWL_USER_AGENTS: list[str] = []  # empty: every request sends USER_AGENT (or the job's `useragent`)

# --- Durable, parallel crawls: the frontier in Redis (runtime/frontier.py, docs/failure-handling.md) -------------
TRAWL_FRONTIER_ENABLED = env.FRONTIER_ENABLED  # off: Scrapy's own in-memory scheduler (no resume, parallelism 1)
# A shard renews its lease every third of this; a dead shard's in-flight requests return to the queue after it.
TRAWL_FRONTIER_LEASE_SECONDS = env.FRONTIER_LEASE_SECONDS
TRAWL_FRONTIER_TTL_SECONDS = 86400  # a frontier nothing touched for this long expires (a job's end deletes it)
# Job error classes reported to Sentry when SENTRY_DSN is set (project/sentry.py): errors of the code or of Trawl,
# not the site's (dns, connection, http_4xx, blocked... stay on the job).
TRAWL_SENTRY_JOB_ERRORS = ["spider_error", "parse", "package", "routing", "worker_lost", "stalled"]
# Record and replay (docs/registry.md, "Replay"): TRAWL_RECORD (a scraper, version or source may set it; a job's
# option `record`) keeps the crawl's responses, at most TRAWL_RECORD_MAX_BYTES of gzipped WARC and
# TRAWL_RECORD_MAX_ITEMS items per shard; a replay's child gets TRAWL_REPLAY_TIMEOUT seconds.
TRAWL_RECORD = False
TRAWL_RECORD_MAX_BYTES = 50 * 1024 * 1024
TRAWL_RECORD_MAX_ITEMS = 20_000
TRAWL_REPLAY_TIMEOUT = 600
TRAWL_MAX_PARALLELISM = 32  # shards one job may ask for (`parallelism`)
# The most a job's `max_pages` / `max_items` options may ask for (runtime/watch/budget.py).
TRAWL_JOB_MAX_PAGES_LIMIT = 1_000_000
TRAWL_JOB_MAX_ITEMS_LIMIT = 10_000_000
# --- Outgoing requests --------------------------------------------------------------------------------
# Refuse private, loopback and link-local targets for callbacks and for crawls submitted by non-admin requesters.
TRAWL_BLOCK_PRIVATE_TARGETS = env.BLOCK_PRIVATE_TARGETS
# Networks the guard lets non-admin crawls reach anyway (CIDR, e.g. an internal site you mean to crawl).
TRAWL_PRIVATE_TARGETS_ALLOWED: list[str] = env.PRIVATE_TARGETS_ALLOWED
# DNS servers ("ip[:port]") that crawls, submission checks and webhooks ask; empty: the system resolver.
TRAWL_DNS_SERVERS: list[str] = env.DNS_SERVERS
parse_servers(TRAWL_DNS_SERVERS)  # a bad entry stops every process at start, not a request later

# --- Ingestion: item schema checks, normalization, price history, category mapping (see docs/ingestion.md) ---
TRAWL_INGESTION_INVALID_SAMPLE = 5  # rejected items a job keeps (with their reasons) in stats["invalid_sample"]
TRAWL_INGESTION_BASE_CURRENCY = ""  # e.g. "EUR": prices also stored converted as `_price_base`; a schema may override
TRAWL_INGESTION_RATES: dict[str, str] = {}  # units of the base currency per unit of each currency, e.g. {"USD": "0.92"}
TRAWL_INGESTION_PRICE_HISTORY = 20  # price changes kept per item (older ones are pruned)
# Field-level history (docs/item-history.md): field changes kept per item (0: no history, whole-item change detection
# only), of which at most this many of volatile fields.
TRAWL_ITEM_CHANGES_MAX = 100
TRAWL_ITEM_VOLATILE_CHANGES_MAX = 10
# A field is volatile for a source when it changed on at least TRAWL_VOLATILE_SHARE of the stored items seen by
# TRAWL_VOLATILE_MIN_RUNS of the source's last TRAWL_VOLATILE_RUNS runs.
TRAWL_VOLATILE_RUNS = 3
TRAWL_VOLATILE_MIN_RUNS = 2
TRAWL_VOLATILE_SHARE = 0.5
# Bounds on what a crawl stores (docs/ingestion.md, "Size bounds"). An item with a field value over
# TRAWL_ITEM_FIELD_MAX_BYTES, or over TRAWL_ITEM_MAX_BYTES in all (UTF-8 bytes of its JSON-like text), is dropped
# in the crawl before it reaches Trawl's store, feeds or the frontier, counted in the job's `items_dropped` and
# logged; a scraper or version may set either (0: no bound).
TRAWL_ITEM_FIELD_MAX_BYTES = 1024 * 1024
TRAWL_ITEM_MAX_BYTES = 2 * 1024 * 1024
TRAWL_ATTRS_MAX_BYTES = 16 * 1024  # a job's `attrs` (copied into every item), as JSON: more is a 400 naming `attrs`
# The most URLs a sitemap crawl's `max_urls` may ask for (a 400 naming it beyond; a stored job is capped at start).
TRAWL_SITEMAP_MAX_URLS = 500_000
TRAWL_INGESTION_CLASSIFIER = "catalog.classifiers.LexicalClassifier"  # or catalog.classifiers.EmbeddingClassifier
# Below this score (0..1) an external category waits for a human.
# None: the classifier's own threshold (lexical 0.75, embedding 0.5).
TRAWL_INGESTION_CATEGORY_THRESHOLD: float | None = None
TRAWL_INGESTION_MAPPING_SECONDS = 300  # how often beat's `map-categories` runs (when the periodic task is created)

# --- Packaged scraper versions: uploaded wheels, one environment per package (see docs/packages.md) ---------
# The STORAGES alias wheels are kept in: the database, or an S3-compatible bucket (TRAWL_PACKAGE_S3_*). Any Django
# storage works as long as every host reaches it: each machine copies a wheel from there the first time it builds one.
TRAWL_PACKAGE_STORAGE = "packages"
# Where wheels were stored (per host) before they moved to the database: read by `manage.py trawl_packages_import`.
TRAWL_PACKAGE_DIR = env.PACKAGE_DIR
# Largest wheel accepted (a 400 naming `package` beyond): a spider project's wheel is kilobytes, its dependencies are
# not uploaded (pip installs them, as wheels only).
TRAWL_PACKAGE_MAX_BYTES = env.PACKAGE_MAX_BYTES
# Per machine: one virtualenv per package hash, built once (under a file lock) and shared by every worker process.
TRAWL_PACKAGE_CACHE_DIR = env.PACKAGE_CACHE_DIR
# Local wheel directories pip searches for a package's Requires-Dist, and whether it may also ask the index (pip's
# own configuration, e.g. PIP_INDEX_URL, applies). Offline machines list their wheelhouse and set NO_INDEX.
TRAWL_PACKAGE_FIND_LINKS: list[str] = env.PACKAGE_FIND_LINKS
TRAWL_PACKAGE_NO_INDEX = env.PACKAGE_NO_INDEX
TRAWL_PACKAGE_BUILD_TIMEOUT = 600  # seconds pip may take to install a package and its dependencies
# scrapyd's addversion.json answers once a worker built the version (a broken egg is an error, as in scrapyd), but
# waits no longer than this: the web worker it holds answers nothing else meanwhile (gunicorn's timeout is 30 s).
TRAWL_SCRAPYD_BUILD_WAIT_SECONDS = 10.0
# A packaged crawl runs in a child process of its environment; the child serves the next job of that package in the
# same worker process too (no second start-up), and exits after this long without one.
TRAWL_PACKAGE_CHILD_IDLE_SECONDS = env.PACKAGE_CHILD_IDLE_SECONDS
# Development only: a changed spider module is imported again by the next job (registry/spiders.py).
TRAWL_SPIDER_RELOAD = env.SPIDER_RELOAD
TRAWL_PACKAGE_CHILDREN_KEPT = 2  # warm children per worker process (other packages' are stopped, oldest first)
# A child runs uploaded code: it gets a Redis user of its own (ACL SETUSER), limited to Trawl's keys, so it cannot
# reach the broker's. Off: it gets REDIS_URL itself (a Redis without ACL, or whose user may not create users).
TRAWL_PACKAGE_CHILD_REDIS_ACL = env.PACKAGE_CHILD_REDIS_ACL
# That user bounds a child only if no Redis user needs no password (which the child would log in as instead): children
# do not start while one does, unless this says so (development; the production settings say no).
TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED = env.PACKAGE_REDIS_NOPASS_ALLOWED
# --- Operations: job logs, monitors, stalls, retention (see docs/operations.md) ------------------------
# A crawl with no response and no item for this long is stopped and fails `stalled` (a version may set its own).
TRAWL_STALL_SECONDS = env.STALL_SECONDS
# Exceptions a crawl's callbacks and item pipelines may raise before its job fails `spider_error` at its end: more
# than TRAWL_MAX_SPIDER_ERRORS, and more than TRAWL_MAX_SPIDER_ERROR_SHARE of the pages and items it handled. So by
# default a small crawl fails at its first exception, and one bad item in thousands does not fail a big one, but a
# pipeline raising on every other item does (docs/operations.md).
TRAWL_MAX_SPIDER_ERRORS = 0
TRAWL_MAX_SPIDER_ERROR_SHARE = 0.01
# The most one page's item extraction by the `selectors` spider may take (seconds).
TRAWL_SELECTORS_PAGE_SECONDS = 5.0
# Structured data (JSON-LD, microdata, OpenGraph) fills the fields a `selectors` config leaves empty on a page; a page
# above this many bytes is not read for it (stat `structured_data/too_large`): extruct walks every microdata element.
TRAWL_STRUCTURED_DATA_MAX_BYTES = 2 * 1024 * 1024
# The `article` scraper (runtime/spiders/article.py): trafilatura takes about 1.5 s per MB of an ordinary page's HTML
# and up to 18 s per MB of a hostile one (in a worker thread, off the reactor), so a page above
# TRAWL_ARTICLE_HTML_MAX_BYTES is not extracted (stat `article/too_large`); its Markdown keeps whole sections within
# TRAWL_ARTICLE_MARKDOWN_MAX_BYTES (the item says `_truncated`), so `markdown` and `sections` fit TRAWL_ITEM_MAX_BYTES.
TRAWL_ARTICLE_HTML_MAX_BYTES = 1024 * 1024
TRAWL_ARTICLE_MARKDOWN_MAX_BYTES = 512 * 1024
# Finished jobs (with logs, sightings, deliveries) older than this are deleted by beat; items stay.
TRAWL_RETENTION_DAYS = env.RETENTION_DAYS
TRAWL_RETENTION_CHUNK = 500  # jobs deleted per transaction, so a big purge never holds long locks
TRAWL_RETENTION_INTERVAL_SECONDS = 3600  # how often beat's `cleanup-jobs` runs
# Every job.alert is also sent here (signed with the webhook secret of TRAWL_ALERT_WEBHOOK_REQUESTER, if it names one).
TRAWL_ALERT_WEBHOOK_URL = env.ALERT_WEBHOOK_URL
TRAWL_ALERT_WEBHOOK_REQUESTER = ""
# max_error_rate stops a running crawl only after this many requests: two early 500s are no trend.
TRAWL_MONITOR_MIN_REQUESTS = 20
TRAWL_MONITOR_HISTORY_RUNS = 5  # max_items_drop compares with the median of the source's last N successful runs
# Per job attempt (and shard): the first half and the last half of this many records are kept, with a marker between.
TRAWL_JOB_LOG_MAX_LINES = 10_000
TRAWL_JOB_LOG_LINE_CHARS = 4000  # longer records (huge tracebacks, HTML in messages) are cut
TRAWL_JOB_LOG_TTL_SECONDS = 7 * 86400  # records left in Redis by a worker that died mid-attempt
TRAWL_JOB_LOG_FLUSH_SECONDS = 0.5  # how often a worker writes new records to Redis (what readers see while it runs)

# --- Rendering (docs/rendering.md) ---------------------------------------------------------------
# Which requests render in headless Chromium: "never", "request" (those whose meta asks: scrapy-playwright's
# `playwright` or Trawl's `render`) or "always"; a scraper, version or source may set it, a job with `render: true`.
TRAWL_RENDER = "request"
TRAWL_RENDER_WAIT_FOR = ""  # a CSS selector, or "networkidle"; "" waits for the page's load event only
TRAWL_RENDER_TIMEOUT = 15.0  # seconds a navigation and its wait may take
TRAWL_RENDER_TIMEOUT_MAX = 60.0  # the most a job's `render_timeout` may ask for
# Resource types a rendered page downloads although a crawl never reads them ("image", "font", "media").
TRAWL_RENDER_RESOURCES: list[str] = []
# Per worker process, whatever the crawl: Chromium's memory is the process's.
TRAWL_RENDER_CHROMIUM = env.CHROMIUM
TRAWL_RENDER_MAX_PAGES = env.RENDER_MAX_PAGES  # pages open at once across the process's crawls
TRAWL_RENDER_SCREENSHOTS = 0  # screenshots of a crawl's first pages (a job's `screenshots` option asks for some)
# Bytes of a rendered page's HTML (what its scripts built) a crawl reads, as DOWNLOAD_MAXSIZE bounds a downloaded body.
TRAWL_RENDER_MAXSIZE = TRAWL_SCRAPY_SETTINGS["DOWNLOAD_MAXSIZE"]
TRAWL_RENDER_SCREENSHOTS_MAX = 10  # per crawl, failures included: a job's screenshots stay small
# Responses that made a spider raise, kept with the job (runtime/watch/error_pages.py): at most this many per job (0:
# none), each its body's first TRAWL_ERROR_PAGE_MAX_BYTES.
TRAWL_ERROR_PAGES_MAX = env.ERROR_PAGES_MAX
TRAWL_ERROR_PAGE_MAX_BYTES = env.ERROR_PAGE_MAX_BYTES
TRAWL_RENDER_RECYCLE_PAGES = env.RENDER_RECYCLE_PAGES  # pages a browser opens before new contexts go to a fresh one
TRAWL_RENDER_RECYCLE_MEMORY_MB = env.RENDER_RECYCLE_MEMORY_MB  # Chromium RSS (MiB) above which it is retired too
