"""Plain Scrapy crawling many sites in one process, for bench/density.py: the baseline of memory and CPU per page.

    python bench/_density_scrapy.py URLS_FILE OUT_JSON SETTINGS_JSON --mode spider|crawlers [--maxdepth 20]

`spider`: one spider whose start URLs are every site (Scrapy's own many-domain way: one engine, one scheduler,
a download slot per host). `crawlers`: one `CrawlerProcess` running a crawler per site (one spider each, as Trawl
runs a crawler per job). Writes the pages fetched, the process's CPU seconds and wall seconds from the first crawler
created to the reactor stopped (imports and interpreter start not counted, as for Trawl's warm workers).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "spiders"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("settings", help="Scrapy settings as a JSON object")
    parser.add_argument("--mode", choices=("spider", "crawlers"), default="spider")
    parser.add_argument("--maxdepth", type=int, default=20)
    args = parser.parse_args()
    from link import LinkSpider
    from scrapy.crawler import CrawlerProcess

    urls = args.urls.read_text().split()
    process = CrawlerProcess(json.loads(args.settings))
    wall, cpu = time.monotonic(), time.process_time()
    groups = [",".join(urls)] if args.mode == "spider" else urls
    crawlers = [process.create_crawler(LinkSpider) for _ in groups]
    for crawler, url in zip(crawlers, groups, strict=True):
        process.crawl(crawler, url=url, maxdepth=str(args.maxdepth))
    process.start()
    stats = [crawler.stats.get_stats() for crawler in crawlers]
    result = {
        "pages": sum(stat.get("item_scraped_count", 0) for stat in stats),
        "errors": sum(stat.get("log_count/ERROR", 0) for stat in stats),
        "cpu_seconds": time.process_time() - cpu,
        "seconds": time.monotonic() - wall,
    }
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
