"""A crawl's scheduler state in Redis, under the job's id, so it outlives the process that crawls it.

- `chunks` / `chunkdata` / `queued`: the frontier, requests (runtime.frontier.codec) packed into chunks by priority,
  most urgent first, first in first out among equals (runtime.frontier.layout; `queue`, a sorted set of sequence
  number + request, is the layout before it, still read).
- `delayed`: requests kept back until they are due (score = due time in ms, Redis time; their priority score in
  `delayedscore`): pages a site refused, sent back for later (throttling/requeue.py). Still the job's work: the job
  does not end while one waits, a resumed attempt finds them, and they join the queue when due.
- `seenbuckets`: the seen-set of request fingerprints (96 bits of Scrapy's SHA-1 fingerprint), 10 bytes each in 4,096
  buckets (runtime.frontier.layout; `seen`, a set of 12-byte fingerprints, is the layout before it, still read).
- `inflight:<attempt>:<shard>`: the requests a shard took from the queue and has not finished (member → score; a
  member is an 8-byte sequence number, unique, and the request),
  held under the shard's lease in `shards` (member `<attempt>:<shard>`, score = lease expiry in ms, Redis time);
  `left`: the shards that left the job, never leased again (the last to leave ends it).
  A request leaves it only once its page was fetched, its links queued and its items stored.
- `wal:<attempt>:<shard>`: the items a shard wrote ahead until its task stored them; `orphans`: a dead shard's.
- `budget:pages`, `budget:items`: the pages the job's crawls sent and the items they kept, every shard and attempt
  together (a job's `max_pages` and `max_items`, runtime.watch.budget).
- `progress`: each shard's latest stats (`<attempt>:<shard>` → JSON), summed into the job's stats over attempts.
- `epoch`: a token written when the frontier was created; a shard whose epoch is no longer there knows Redis lost the
  frontier (runtime.frontier.leases).

Requests of a shard whose lease expired, or of an earlier attempt, go back to the queue (reclaim). Every script
refreshes the keys it writes to expire after TRAWL_FRONTIER_TTL_SECONDS (a day) untouched; the job's end unlinks them.
Modules: `store` (the Frontier a shard uses), `leases` (epoch, leases, leaving; the lease-renewing thread),
`commits` (what a shard writes), `layout` (the queue and seen-set in memory), `codec` and `datatags` (a Scrapy
request as JSON, data only: never a pickle, since a packaged version's child may write its job's frontier), `bounded`
(a capped set for what a process remembers).
"""

from __future__ import annotations

from runtime.frontier.leases import ENDED, LOST, LeaseKeeper
from runtime.frontier.store import (
    FINGERPRINT_BYTES,
    Committed,
    Frontier,
    FrontierEnded,
    FrontierLost,
    async_binary_redis,
    binary_redis,
    compact_fingerprint,
    frontier_delete,
)

# The SCHEDULER and DUPEFILTER_CLASS settings of a crawl that runs on a job's frontier.
SCHEDULER = "runtime.frontier.scheduler.FrontierScheduler"
DUPEFILTER = "runtime.frontier.scheduler.FrontierDupeFilter"

__all__ = (
    "DUPEFILTER",
    "ENDED",
    "FINGERPRINT_BYTES",
    "LOST",
    "SCHEDULER",
    "Committed",
    "Frontier",
    "FrontierEnded",
    "FrontierLost",
    "LeaseKeeper",
    "async_binary_redis",
    "binary_redis",
    "compact_fingerprint",
    "frontier_delete",
)
