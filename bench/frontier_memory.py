"""A frontier's memory at a million pages: bytes per queued request and per seen fingerprint in Redis, and how much a
crawl process grows.

A synthetic crawl, no HTTP: page i links to its binary-tree children 2i+1 and 2i+2 (new pages) and to three pages
queued before (its parent, its successor, a pseudo-random one), with a Referer and a depth as Scrapy's spider
middlewares set them. It runs through the real FrontierScheduler (enqueue_request, next_request, the engine being
done with a request, the commit that writes it all to Redis) and the real Frontier, in one process, 16 requests held
at a time. The queue peaks at ~pages/2 requests halfway; the seen-set ends with every page.

Measured with Redis's MEMORY USAGE (every element counted) on the keys the crawl wrote: the queue at its peak, the
seen-set at the end, each over the number of entries. The baseline, in the same run: the layout before (a sorted set
of plainly pickled requests, a set of 12-byte fingerprints), written with the same requests. The process's RSS is
sampled through the crawl; its peak less its RSS before the crawl is the growth (goal ≤ 50 MiB). What the codec's
options would take per request is printed too (plain pickle, compact JSON, compact JSON deflated without and with
the preset).

    BENCH_REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python bench/frontier_memory.py [--pages 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
import types
import uuid
import zlib

from _common import PeakRss, exit_on_sigterm

GOALS = {"queued_request_bytes": 120, "fingerprint_bytes": 24, "rss_growth_mib": 50}
BASELINE_SAMPLE = 100_000  # requests written in the old layout for the baseline
SITE = "https://shop.example.org"


def page_url(n: int) -> str:
    return f"{SITE}/category/{n % 97}/product-{n}.html"


def links_of(i: int, pages: int) -> list[int]:
    new = [n for n in (2 * i + 1, 2 * i + 2) if n < pages]
    return [*new, (i - 1) // 2 if i else 0, (i + 1) % pages, (i * 37 + 11) % pages]


def make_request(spider, n: int, parent: int, depth: int):
    from scrapy import Request

    return Request(page_url(n), callback=spider.parse, headers={"Referer": page_url(parent)}, meta={"depth": depth})


def memory_usage(client, *keys: str) -> int:
    return sum(int(client.memory_usage(key, samples=0) or 0) for key in keys)


class SyntheticCrawl:
    """The scheduler of one shard and what a crawl does to it, without an engine or a download."""

    def __init__(self, pages: int) -> None:
        from scrapy import Spider
        from scrapy.crawler import Crawler
        from scrapy.utils.reactor import install_reactor

        from crawls.services.shards import frontier_settings
        from runtime.frontier.scheduler import FrontierScheduler

        class Shop(Spider):
            name = "shop"

            def parse(self, response):
                pass

        self.pages, self.job = pages, uuid.uuid4().hex
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")  # never run: no engine, no HTTP
        from runtime.settings.compose import with_pins, with_trawl_defaults

        # The project's knobs (the frontier's TTL and lease among them), as a crawl's composed settings hold them.
        knobs = with_pins(
            with_trawl_defaults({"LOG_LEVEL": "ERROR", **frontier_settings(job_id=self.job, attempt=1, shard=0)})
        )
        crawler = Crawler(Shop, knobs)
        crawler._apply_settings()
        crawler.engine = types.SimpleNamespace()  # no engine to wake: this loop is the engine
        self.spider = Shop()
        self.scheduler = FrontierScheduler.from_crawler(crawler)
        self.scheduler.spider = self.spider
        self.frontier = self.scheduler.frontier
        self.frontier.open()
        self.frontier.renew()  # a lease: only a shard holding one takes requests (no renewing thread: a short run)
        self.done = 0
        self.peak_queue = (0, 0)  # (requests queued, bytes) at the queue's largest

    async def run(self) -> None:
        from runtime.frontier.layout import QUEUE_KEYS

        scheduler = self.scheduler
        scheduler.enqueue_request(make_request(self.spider, 0, 0, 0))
        scheduler._send_outbox()
        next_look = self.pages // 2
        while True:
            while scheduler.commits:
                await asyncio.gather(*scheduler.commits)
            batch = []
            while (request := scheduler.next_request()) is not None:
                batch.append(request)
            if not batch:
                scheduler._send_outbox()
                if not scheduler.commits:
                    return
                continue
            for request in batch:
                i = int(request.url.rsplit("-", 1)[1][:-5])
                for n in links_of(i, self.pages):
                    scheduler.enqueue_request(make_request(self.spider, n, i, request.meta["depth"] + 1))
                scheduler._finished(request)
                self.done += 1
            if self.done >= next_look:  # halfway: the queue at its largest
                next_look = self.pages * 2
                queued = self.frontier.pending()
                usage = memory_usage(self.frontier.redis, *(self.frontier.key(k) for k in QUEUE_KEYS[:3]))
                self.peak_queue = (queued, usage)

    def seen_bytes(self) -> int:
        return memory_usage(self.frontier.redis, self.frontier.key("seenbuckets"))


def baseline(crawl: SyntheticCrawl) -> dict:
    """The layout before, written with the same requests: plain pickles in a sorted set, 12-byte fingerprints in a
    set; and what each of the codec's options takes per request."""
    from runtime.frontier import codec, compact_fingerprint

    client, spider = crawl.frontier.redis, crawl.spider
    fingerprinter = crawl.scheduler.df.fingerprinter
    queue, seen = f"bench:frontier:{{{crawl.job}}}:oldqueue", f"bench:frontier:{{{crawl.job}}}:oldseen"
    sizes = {"plain_pickle": 0, "compact": 0, "compact_deflated": 0, "compact_deflated_preset": 0}
    for start in range(0, BASELINE_SAMPLE, 5000):
        members, fingerprints = {}, []
        for n in range(start, start + 5000):
            request = make_request(spider, n, (n - 1) // 2, 10)
            plain = pickle.dumps(request.to_dict(spider=spider), protocol=pickle.HIGHEST_PROTOCOL)
            members[struct.pack(">Q", n) + plain] = 0
            fingerprints.append(compact_fingerprint(fingerprinter.fingerprint(request)))
            short = json.dumps(codec.compact_dict(request, spider), separators=(",", ":")).encode()
            sizes["plain_pickle"] += len(plain)
            sizes["compact"] += 1 + len(short)
            sizes["compact_deflated"] += 1 + len(zlib.compress(short, 9)[2:-4])  # raw deflate: no zlib header
            sizes["compact_deflated_preset"] += len(codec.encode(request, spider))
        client.zadd(queue, members)
        client.sadd(seen, *fingerprints)
    result = {
        "queued_request_bytes": memory_usage(client, queue) / BASELINE_SAMPLE,
        "fingerprint_bytes": memory_usage(client, seen) / BASELINE_SAMPLE,
        "payload_bytes": {name: total / BASELINE_SAMPLE for name, total in sizes.items()},
    }
    client.unlink(queue, seen)
    return result


def crawl_rss_growth(pages: int, *, unbounded: bool) -> tuple[SyntheticCrawl, int, float]:
    """Crawl `pages`; return the crawl, the peak RSS growth over the run (bytes) and its seconds. `unbounded`: the
    scheduler's `known` set as it was before, a plain set that keeps every fingerprint (the RSS baseline)."""
    import psutil

    crawl = SyntheticCrawl(pages)
    if unbounded:
        crawl.scheduler.known = set()
    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    started = time.monotonic()
    try:
        with PeakRss(lambda: [os.getpid()], interval=0.2) as peak:
            asyncio.run(crawl.run())
    except BaseException:
        crawl.frontier.delete()
        raise
    return crawl, peak.peak - rss_before, time.monotonic() - started


def baseline_rss_mib(pages: int) -> float:
    """The RSS baseline, in a process of its own (memory this one freed would be reused and hide the growth)."""
    command = [sys.executable, __file__, "--pages", str(pages), "--unbounded"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=os.environ).stdout
    return json.loads(out.strip().splitlines()[-1])["rss_growth_mib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--unbounded", action="store_true", help="only the RSS baseline (run by the bench itself)")
    args = parser.parse_args()
    url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
    os.environ["REDIS_URL"] = url
    os.environ.setdefault("TRAWL_INSTALLATION_ID", "benchmem")  # key names without a database to derive them from
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    exit_on_sigterm()
    import django

    django.setup()
    from project.redis.server import redis_start_if_absent

    server = redis_start_if_absent(url, log_path=os.path.join(tempfile.gettempdir(), "bench-redis.log"))
    crawl = None
    try:
        crawl, growth, seconds = crawl_rss_growth(args.pages, unbounded=args.unbounded)
        if args.unbounded:
            print(json.dumps({"rss_growth_mib": round(growth / 2**20, 1)}))
            return
        queued, queue_bytes = crawl.peak_queue
        measured = {
            "pages": crawl.done,
            "seconds": round(seconds, 1),
            "queued_request_bytes": round(queue_bytes / max(1, queued), 1),
            "queued_at_peak": queued,
            "fingerprint_bytes": round(crawl.seen_bytes() / max(1, crawl.done), 1),
            "rss_growth_mib": round(growth / 2**20, 1),
        }
        crawl.frontier.delete()
        before = baseline(crawl)
        before["rss_growth_mib"] = baseline_rss_mib(args.pages)
        print(f"{crawl.done:,} pages in {seconds:.0f} s (Redis {url})")
        print(f"{'':24} {'measured':>10} {'goal':>8} {'baseline':>10}  measured/baseline")
        for name, goal in GOALS.items():
            value, old = measured[name], before[name]
            verdict = "ok" if value <= goal else "OVER"
            print(f"{name:24} {value:10.1f} {goal:8} {old:10.1f}  {value / old:.2f}  {verdict}")
        print("payload bytes per request:", ", ".join(f"{k} {v:.1f}" for k, v in before["payload_bytes"].items()))
        print(json.dumps({"measured": measured, "goals": GOALS, "baseline": before}))
    finally:
        if crawl is not None:
            crawl.frontier.delete()
        if server is not None:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
