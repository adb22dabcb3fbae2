"""Rendering JavaScript pages in headless Chromium (docs/rendering.md): the download handler every http/https request
of a crawl goes through (dispatch.py), which builds the rendering one (handler.py) when the crawl first renders, the
worker's browser (browser.py) and the rule every sub-request of a rendered page passes (subrequests.py), enforced for
guarded crawls by the proxy their pages connect through (proxy.py). Only handler.py, browser.py and what they import
load Playwright: a process whose crawls never render never imports it."""
