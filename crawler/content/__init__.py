"""A page's content as people read it: its main text and Markdown
(:mod:`crawler.content.main_text`), its fingerprint for near-duplicates
(:mod:`crawler.content.fingerprints`), and the Markdown files of ``--markdown``
(:mod:`crawler.content.markdown_files`)."""
