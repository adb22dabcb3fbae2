"""Tests of the worker's Scrapy runtime (runtime/)."""
