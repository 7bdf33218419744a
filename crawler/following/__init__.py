"""Following a crawl: a record per message (:mod:`.records`), gathered and sent to a waiting
seeder (:mod:`.bookkeeping`, :mod:`.record_queue`), the seeder's side (:mod:`.seeder`:
seeding, ``--wait``, ``--status``), the progress line, and dead letters."""
