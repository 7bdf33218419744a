"""The command line's parser: :class:`Parser`, and a crawl's flags made from
:data:`crawler.option_table.TABLE` (:func:`add_seeding`), a flag a row.

Each flag's type is its row's check, a refusal said as a usage error
(:func:`crawler.cli.crawl_flags.flag_type`); its settings key (``--config``, ``-s``)
is its long flag without the dashes, kept in :attr:`Parser.settings` for
:mod:`crawler.cli.settings`.  A parser knows its own flags and subcommands
(:attr:`Parser.option_names`, :attr:`Parser.subcommands`), so nothing reads argparse's
private lists.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from crawler.cli.crawl_flags import flag_type, http_url
from crawler.option_table import TABLE, Option


@dataclass(frozen=True)
class Setting:
    """A key of a ``--config`` file or ``-s``: the option it sets, and whether it is a
    switch's ``no-`` form (``no-obey-robots = true``: ``--no-obey-robots``)."""

    option: Option
    negated: bool = False


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--max-d`` is no ``--max-depth``), whose usage
    errors are one line and a pointer to ``--help``; it keeps the names of its flags
    (those added through :meth:`add_argument` and :meth:`group`), its subcommands
    (:meth:`subcommand`) and its settings keys (:func:`add_seeding`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        #: Every flag of this parser, short and long.
        self.option_names: list[str] = []
        #: Its subcommands, by name.
        self.subcommands: dict[str, Parser] = {}
        #: The keys a settings file may set, by key.
        self.settings: dict[str, Setting] = {}
        #: The flags that take a value or none (``--render``, ``--render auto``): the
        #: words each takes.
        self.optional_words: dict[str, tuple[str, ...]] = {}
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, but a flag that may take a value (:attr:`optional_words`) takes the
        next argument only when it is one of its words: ``--render URL`` is ``--render``
        and a URL, not ``--render=URL``."""
        given = list(sys.argv[1:] if args is None else args)
        for i, token in enumerate(given[:-1]):
            if token in self.optional_words and given[i + 1] not in self.optional_words[token]:
                given[i] = f"{token}={self.optional_words[token][0]}"
        return super().parse_known_args(given, namespace)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self.option_names += [name for name in args if name.startswith("-")]
        return super().add_argument(*args, **kwargs)

    def group(self, title: str) -> Group:
        """An argument group whose flags this parser knows."""
        return Group(self, title)

    def add_commands(self, **kwargs: Any) -> None:
        """Make this parser one of subcommands (``add_subparsers``' keywords)."""
        self._commands = self.add_subparsers(**kwargs)

    def subcommand(self, name: str, **kwargs: Any) -> Parser:
        """The subcommand ``name`` (``add_parser``'s keywords), kept."""
        made: Parser = self._commands.add_parser(name, **kwargs)
        self.subcommands[name] = made
        return made

    def error(self, message: str) -> NoReturn:
        message += _closest_option(self, message)
        self.exit(2, f"{self.prog}: error: {message}\nSee '{self.prog} --help'.\n")

    def all_option_names(self) -> Iterator[str]:
        """The flags of this parser and of its subcommands."""
        yield from self.option_names
        for subcommand in self.subcommands.values():
            yield from subcommand.all_option_names()


class Group:
    """An argument group of a :class:`Parser`, which learns each flag added to it."""

    def __init__(self, parser: Parser, title: str) -> None:
        self._parser = parser
        self._group = parser.add_argument_group(title)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self._parser.option_names += [name for name in args if name.startswith("-")]
        return self._group.add_argument(*args, **kwargs)


def _closest_option(parser: Parser, message: str) -> str:
    """For an unknown option, `` (did you mean --max-pages?)``: the closest one known to
    ``parser`` or its subcommands."""
    if not message.startswith("unrecognized arguments: "):
        return ""
    known = list(parser.all_option_names())
    for token in message.removeprefix("unrecognized arguments: ").split():
        name = token.partition("=")[0]
        if not name.startswith("-"):
            continue
        close = [o for o in known if o.lower() == name.lower()]
        close = close or difflib.get_close_matches(name, known, 1)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def add_arguments(parser: Parser, *, upstream: bool = True) -> None:
    """The crawl options, the same for ``--local`` and for seeding workers: all off by
    default as upstream (``python -m crawler.example``), or, for ``crawler crawl``, with
    links parsed, the seeds' sites kept, robots.txt obeyed and each host paced by its
    server, each with a ``--no-`` form, and ``--upstream`` to turn the four off at once."""
    title = "crawl options (all off by default: upstream behaviour)" if upstream else None
    group = parser.group(title or "crawl options")
    _add_options(parser, group, "crawl", upstream=upstream)


def add_seeding(parser: Parser, *, upstream: bool) -> None:
    """The URLs, the crawl options, and how the crawl runs: workers or ``--local``."""
    parser.add_argument("urls", metavar="url", nargs="*", type=http_url, help="an http(s) URL")
    add_arguments(parser, upstream=upstream)
    _add_options(parser, parser.group("how the crawl runs"), "run", upstream=upstream)


def _add_options(parser: Parser, group: Group, which: str, *, upstream: bool) -> None:
    """The flags of the rows of ``which`` group, and their settings keys."""
    for option in TABLE:
        if option.group != which or (option.crawl_only and upstream):
            continue
        group.add_argument(*option.flags, **_flag(option, upstream=upstream))
        parser.settings[option.setting] = Setting(option)
        if option.kind == "optional":
            parser.optional_words.update(dict.fromkeys(option.flags, option.words))
        if option.kind == "on" and not upstream:
            parser.settings["no-" + option.setting] = Setting(option, negated=True)


def _flag(option: Option, *, upstream: bool) -> dict[str, Any]:
    """``add_argument``'s keywords for ``option``'s flag."""
    text = option.help if upstream else option.help + option.crawl_note
    if option.kind == "on" and not upstream:
        return {"action": argparse.BooleanOptionalAction, "default": None, "help": text}
    if option.switch:
        return {"action": "store_true", "help": text}
    keywords: dict[str, Any] = {"type": flag_type(option.check), "help": text}
    if option.metavar is not None:
        keywords["metavar"] = option.metavar
    if option.kind == "optional":
        keywords.update(nargs="?", const=True, default=option.default)
    if option.kind == "list":
        keywords["action"] = "append"
    return keywords
