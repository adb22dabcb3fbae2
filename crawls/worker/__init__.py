"""A crawl worker process's side: what it does as it starts and stops, and its warm shutdown."""
