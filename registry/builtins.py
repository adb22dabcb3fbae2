"""Scrapers every Trawl has: `link` (the crawl API), `selectors` (config-driven), `sitemap` and `article`."""

from __future__ import annotations

BUILTIN_SCRAPERS = {
    "link": ("Fetch a URL and follow links (Scrapy Cluster's crawl API).", "runtime.spiders.link.LinkSpider"),
    "selectors": (
        "Extract items with CSS/XPath selectors from a source's config, no code.",
        "runtime.spiders.selectors.SelectorsSpider",
    ),
    "sitemap": (
        "Read sitemaps and indexes (gzip too); make product sources.",
        "runtime.spiders.sitemap.SitemapSpider",
    ),
    "article": (
        "A page's main text as Markdown (title, published, lang, sections), boilerplate removed; follows links.",
        "runtime.spiders.article.ArticleSpider",
    ),
}


def builtins_ensure(scraper_model=None, version_model=None) -> None:
    """Create the built-in scrapers (stable default 1.0.0) unless they exist. Migrations pass historical models."""
    if scraper_model is None:
        from registry.models import Scraper as scraper_model
        from registry.models import ScraperVersion as version_model
    for name, (description, spider) in BUILTIN_SCRAPERS.items():
        scraper, _ = scraper_model.objects.get_or_create(name=name, defaults={"description": description})
        if not version_model.objects.filter(scraper=scraper).exists():
            version_model.objects.create(
                scraper=scraper, version="1.0.0", variant="stable", spider=spider, is_default=True, traffic_pct=0
            )
