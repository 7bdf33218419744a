"""The frontier: which URLs enter a crawl (scope), which message owns each (claims),
when it may be fetched (politeness: budget, robots.txt, rate), and the crawl's counters,
all kept in a dedup store (:mod:`crawler.stores`)."""
