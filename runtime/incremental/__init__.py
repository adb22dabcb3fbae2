"""Re-crawls that skip what did not change: a source's shared HTTP cache (ETag / Last-Modified) and sitemap lastmods."""
