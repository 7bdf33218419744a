"""Links: an ``href``'s bytes cleaned into a URL (:mod:`.cleaning`), every ``<a href>`` of
a page found by an HTML tokenizer (:mod:`.extraction`), one spelling per URL (:mod:`.canonical`)."""
