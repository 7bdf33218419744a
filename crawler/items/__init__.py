"""Items: the JSON objects page handlers yield (``Handled(items=[...])``), written to the
crawl's item sink (``--items``: a JSON lines or CSV file, or a PostgreSQL table) and
counted (:mod:`crawler.items.counting`)."""
