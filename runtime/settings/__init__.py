"""A crawl's Scrapy settings: composed once from a plain description of the crawl; Trawl's pins kept over the spider."""
