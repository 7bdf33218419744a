"""Tracking a crawl: after each message its record out, its URL marked done and the
crawl's counters (:mod:`.bookkeeping`); records from the workers to a waiting seeder
(:mod:`.record_queue`); the seeder's side (:mod:`.seeder`: seeding, ``--wait``,
``--status``, ``--cancel``), the progress line, and dead letters."""
