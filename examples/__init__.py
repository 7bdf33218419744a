"""Page handlers to copy: each a function ``handler(page) -> dict | None``
(:mod:`crawler.handlers`)."""
