"""The worker's Scrapy runtime: what runs inside a crawl process.

The apps hand it a plain description of a crawl and receive the outcome, items, log records and progress back; it
imports no app's models, services, selectors or tasks. Folders by concern: `bridge` (crochet, the reactor, a crawl's
run and outcome), `settings` (composition and Trawl's pins), `frontier` (the job's frontier in Redis, Scrapy's
scheduler and dupefilter on it), `guard` (schemes, resolver, handlers), `inputs` (requester regexes and XPath),
`rendering` (headless Chromium), `packaged` (a version's child process), `spiders` (built-in spiders),
`watch` (watchdogs), `incremental` (re-crawls that skip what did not change).
"""
