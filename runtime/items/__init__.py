"""What a crawl's items may be: bounded in size before Trawl stores them, and safe as CSV cells."""
