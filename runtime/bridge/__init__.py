"""The crochet bridge: the worker's one reactor, a crawl run on it, and what it reports (outcome, stats, items, log)."""
