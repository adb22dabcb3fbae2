"""What a crawl may reach: http/https only, public addresses only (one DNS resolution for check and connection)."""
