"""The figures of bench/density.py: rates from the site server's log of hits, the table, the ratios to plain Scrapy
and issue 42's goals."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from _common import mib

RATE_GOAL, RSS_GOAL, RSS_LIMIT, CPU_GOAL = 0.95, 1.5, 2 * 2**30, 1.2


def hit_figures(hits: Path, hosts: list[str], pages: int, started: float) -> dict:
    served_at = defaultdict(list)
    fetched = set()
    for line in hits.read_text().splitlines():
        at, host, path = line.split(" ", 2)
        if path.endswith(".html"):
            served_at[host].append(float(at))
            fetched.add((host, path))
    times = [at for host_times in served_at.values() for at in host_times]
    site_rates = sorted((len(t) - 1) / (max(t) - min(t)) for t in served_at.values() if len(t) > 1 and max(t) > min(t))
    window = max(times) - min(times) if len(times) > 1 else 0.0
    count = len(times)
    return {
        "pages_served": count,
        "pages_lost": sum((host, f"/page-{n}.html") not in fetched for host in hosts for n in range(pages)),
        "fetched_twice": count - len(fetched),
        "window_seconds": round(window, 2),
        "pages_per_s": round((count - len(served_at)) / window, 1) if window else 0.0,
        "site_pages_per_s_median": round(site_rates[len(site_rates) // 2], 2) if site_rates else 0.0,
        "end_to_end_pages_per_s": round(count / (max(times) - started), 1) if times else 0.0,
    }


def report(results: list[dict], args) -> dict:
    asked = args.sites * args.rate
    base = next((r for r in results if r["setup"] == "scrapy"), None)
    print(f"\n{args.sites} sites × {args.pages} pages at {args.rate:g} requests/s each: {asked:g} pages/s asked")
    print("setup     procs  pages/s (÷ asked)  end-to-end  peak RSS (all)        CPU/page   lost  failed")
    for r in results:
        r["of_asked"] = round(r["pages_per_s"] / asked, 3)
        r["cpu_ms_per_page"] = round(1000 * r["cpu_seconds"] / r["pages"], 2) if r["pages"] else None
        # The CPUs this set-up's crawl processes would need to crawl at the rate asked: above the machine's, the
        # rate cannot be reached whatever the scheduling.
        r["cpus_for_asked"] = round(asked * r["cpu_seconds"] / r["pages"], 2) if r["pages"] else None
        if base and r["pages"]:
            r["rss_ratio"] = round(r["peak_rss"] / base["peak_rss"], 2)
            r["pss_ratio"] = round(r["peak_pss_all"] / base["peak_pss_all"], 2)
            r["cpu_ratio"] = round(r["cpu_ms_per_page"] / base["cpu_ms_per_page"], 2)
        print(
            f"{r['setup']:<9} {r['processes']:>5}  {r['pages_per_s']:7.1f} ({r['of_asked']:.2f})"
            f"  {r['end_to_end_pages_per_s']:10.1f}  {mib(r['peak_rss']):>8} ({mib(r['peak_rss_all'])})"
            f"  {r['cpu_ms_per_page'] or 0:7.2f} ms  {r['pages_lost']:>4}  {r['jobs_failed']:>6}"
            f"   ratios to scrapy: RSS {r.get('rss_ratio', '-')} (PSS of all {r.get('pss_ratio', '-')}),"
            f" CPU/page {r.get('cpu_ratio', '-')};"
            f" CPUs for the rate asked {r['cpus_for_asked']}, machine {r['machine_busy_cores']} busy"
        )
    summary = {"bench": "density", "sites": args.sites, "pages": args.pages, "rate": args.rate, "asked": asked}
    for r in results:
        for key in ("peak_rss", "peak_rss_all", "peak_pss_all", "idle_pool_rss"):
            if key in r:
                r[f"{key}_mib"] = round(r.pop(key) / 2**20)
    summary["setups"] = results
    trawl = next((r for r in results if r["setup"] == "trawlk"), None)
    if trawl and base:
        goals = {
            "pages_per_s_of_asked": trawl["of_asked"] >= RATE_GOAL,
            "rss_ratio": trawl["rss_ratio"] <= RSS_GOAL and trawl["peak_rss_mib"] * 2**20 <= RSS_LIMIT,
            "cpu_ratio": trawl["cpu_ratio"] <= CPU_GOAL,
            "none_lost": trawl["pages_lost"] == 0 and trawl["jobs_failed"] == 0,
        }
        print("goals (issue 42), trawlk:", ", ".join(f"{k} {'PASS' if v else 'NOT MET'}" for k, v in goals.items()))
        summary["goals"] = goals
    return summary
