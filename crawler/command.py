"""``python -m crawler.command``: the ``crawler`` command, which lives in
:mod:`crawler.cli.command`; kept here for the scripts and tests that run it so."""

from __future__ import annotations

import sys

from crawler.cli.command import main, parser

__all__ = ["main", "parser"]

if __name__ == "__main__":
    sys.exit(main())
