"""The embedded crawl: a crawl run by this process rather than by workers (``--local``,
and the Python API's ``Crawl``).  Its one entry point is :func:`crawler.embedded.entry.run`,
which the command line (:mod:`crawler.cli`) and the API (:mod:`crawler.api`) call with a
:class:`~crawler.crawl_spec.CrawlSpec`; it also seeds a crawl for the workers and
follows it (``--wait``), so the front door has one function to call either way.

Below it: :mod:`.one_process` (``--local``: worker threads, :mod:`.worker`, in this
process) and :mod:`.processes` (``--local --processes N``: the crawl forked in N shards,
:mod:`.shards`, sharing a few keys through :mod:`.shared_store`).  No module outside
the command line, the API and this folder imports it (a contract in pyproject.toml)."""
