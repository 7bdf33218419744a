"""Keeping what a crawl fetched: WARC files (:mod:`crawler.archiving.warc`)."""
