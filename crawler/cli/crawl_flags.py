"""A crawl's flags as argparse reads them: each flag's type is its row's check
(:data:`crawler.option_table.TABLE`, from :mod:`crawler.option_rules`), the very check
the Python API gives its keywords, a :class:`~crawler.option_rules.BadValue` said as a
usage error (:func:`flag_type`); :func:`spec_of` makes the
:class:`~crawler.crawl_spec.CrawlSpec` the parsed flags describe."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from crawler import option_rules
from crawler.crawl_spec import CrawlSpec
from crawler.option_rules import BadValue
from crawler.option_table import BY_NAME

T = TypeVar("T")


def flag_type(check: Callable[[str], T]) -> Callable[[str], T]:
    """An ``argparse`` type: ``check`` (:mod:`crawler.option_rules`'s, which the Python
    API checks its keywords by), its :class:`BadValue` said as a usage error."""

    def checked(value: str) -> T:
        try:
            return check(value)
        except BadValue as e:
            raise argparse.ArgumentTypeError(str(e)) from e

    checked.__name__ = checked.__qualname__ = check.__name__
    return checked


def spec_of(arguments: argparse.Namespace) -> CrawlSpec:
    """The crawl the flags of :func:`crawler.cli.parser.add_seeding` describe (each value
    argparse parsed, None for a flag not given), made as any crawl is made
    (:meth:`CrawlSpec.from_options`): raises :class:`~crawler.crawl_spec.CrawlError`."""
    given = {name: value for name, value in vars(arguments).items() if name in BY_NAME}
    return CrawlSpec.from_options(arguments.urls, given)


#: Types of flags that are no crawl option (a URL, a crawl id of ``crawler status``).
http_url = flag_type(option_rules.http_url)
crawl_id = flag_type(option_rules.crawl_id)
domain_name = flag_type(option_rules.domain_name)
port = flag_type(option_rules.port)
