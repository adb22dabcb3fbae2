"""Watchdogs a crawl carries: stall, error rate, field coverage, blocks, Trawl's own outages, a site's Retry-After."""
