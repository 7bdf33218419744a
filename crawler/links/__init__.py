"""Links: an ``href``'s bytes cleaned into a URL (:mod:`.cleaning`), every ``<a href>`` of
a page found by an HTML parser, Lexbor's through selectolax (:mod:`.extraction`), one
spelling per URL (:mod:`.canonical`)."""
