"""Rendering JavaScript pages in headless Chromium (docs/rendering.md): the worker's browser (browser.py), the
download handler every http/https request of a crawl goes through (handler.py) and the rule every sub-request of a
rendered page passes (subrequests.py)."""
