"""Celery execution pools of Trawl's own (project.pools.crawlhost: several crawls per process)."""
