"""Packaged versions: a crawl in a child process run from the version's own environment, and what it may reach."""
