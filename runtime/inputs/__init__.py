"""Requester input a crawl will run: option and config checks, regexes on RE2, XPath without extensions."""
