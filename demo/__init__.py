"""A small static shop served locally, so `make run` has something real to crawl."""
