"""A crawl's options from a file and from ``-s``: ``--config FILE`` (TOML) and
``-s NAME=VALUE``.

A key is a long option's name without its dashes (``max-pages = 3``, ``obey-robots =
false``, ``header = ["A: 1", "B: 2"]`` for an option that may be given more than
once): the keys :func:`crawler.cli.parser.add_seeding` made from the option table, kept
in :attr:`Parser.settings <crawler.cli.parser.Parser.settings>`.  Each value is checked
by the very check the option's flag has, so a bad value is the same usage error.  The
command line wins over ``-s``, ``-s`` over the file, the file over the defaults.  An
unknown key, and a key that is not a crawl option (``help``, ``config``...), is refused
in one line naming it, with the closest option when there is one.  The file is read
as :mod:`crawler.local_files` reads an input: a regular file (not a FIFO or a device),
at most :data:`MAX_FILE` bytes, a UTF-8 byte-order mark skipped.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from crawler.cli.crawl_flags import flag_type
from crawler.cli.parser import Parser
from crawler.local_files import InputError, open_input, read_whole
from crawler.option_table import Option

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - CPython 3.10
    import tomli as tomllib

#: The largest ``--config`` file read, in bytes: a crawl's options take a few hundred.
MAX_FILE = 1024 * 1024
#: How much of a long ``-s`` is quoted in a refusal.
SHOWN_SET = 80


def add_settings(parser: Parser) -> None:
    """``--config FILE`` and ``-s NAME=VALUE``, for :func:`parse_args` to read."""
    group = parser.group("settings")
    group.add_argument(
        "--config",
        metavar="FILE",
        help="read options from FILE (TOML: max-pages = 3); the command line wins",
    )
    group.add_argument(
        "-s",
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="set one option as a --config file would (repeatable): -s max-pages=3",
    )


def parse_args(parser: Parser, args: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args(args)``, the options of ``--config`` and ``-s`` its defaults."""
    read_into(parser, args)
    return parser.parse_args(args)


def read_into(parser: Parser, args: Sequence[str]) -> None:
    """Make the options ``--config`` and ``-s`` in ``args`` set ``parser``'s defaults."""
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--config")
    early.add_argument("-s", "--set", action="append", default=[])
    found, _ = early.parse_known_args(args)
    settings: dict[str, tuple[str, Any]] = {}
    if found.config is not None:
        for name, value in read_file(parser, found.config).items():
            settings[name] = (f"--config {found.config}", value)
    for item in found.set:
        name, equals, text = item.partition("=")
        shown = item if len(item) <= SHOWN_SET else item[: SHOWN_SET - 3] + "..."
        if not equals or not name.strip():
            parser.error(f"-s {shown}: not NAME=VALUE")
        try:
            settings[name.strip()] = (f"-s {shown}", _value(text))
        except InputError as e:
            parser.error(f"-s {shown}: {e}")
    parser.set_defaults(**defaults(parser, settings, given=args))


def read_file(parser: Parser, path: str) -> dict[str, Any]:
    """The keys and values of a TOML file (a UTF-8 byte-order mark first skipped): a
    usage error when it cannot be read, is no regular file, is larger than
    :data:`MAX_FILE` or nests arrays or tables too deep."""
    try:
        with open_input(path) as file:
            text = read_whole(file, MAX_FILE).decode("utf-8")
        return _toml(text)
    except InputError as e:
        parser.error(f"--config {path}: {e}")
    except OSError as e:  # a read that failed (EIO)
        parser.error(f"--config {path}: {e.strerror or e}")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        parser.error(f"--config {path}: not TOML: {e}")


def _value(text: str) -> Any:
    """``-s``'s value as TOML reads it (``3``, ``true``, ``["a", "b"]``), else as text;
    an :class:`InputError` for one nested too deep."""
    try:
        return _toml(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def _toml(text: str) -> dict[str, Any]:
    """``text`` read as TOML; an :class:`InputError` when its arrays or tables nest too
    deep for the parser (it recurses: ``[[[...]]]`` 20,000 deep would overflow the stack)."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InputError("arrays or tables nested too deep") from None


def defaults(
    parser: Parser,
    settings: Mapping[str, tuple[str, Any]],
    *,
    given: Sequence[str] = (),
) -> dict[str, Any]:
    """Each setting (name -> (where it was given, value)) as the value of its option's
    ``dest``, checked by the option's check; a usage error on the first that is wrong.
    An option the command line ``given`` repeats itself is left to it alone."""
    values: dict[str, Any] = {}
    for name, (where, value) in settings.items():
        setting = parser.settings.get(name)
        if setting is None:
            close = difflib.get_close_matches(name, list(parser.settings), 1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            parser.error(f"{where}: {name!r} is not a crawl option{hint}")
        if _on_command_line(parser, setting.option, given):
            continue
        try:
            converted = _converted(setting.option, value)
            if setting.negated:
                converted = not converted  # no-obey-robots = true: --no-obey-robots
            values[setting.option.name] = converted
        except (argparse.ArgumentTypeError, ValueError, TypeError) as e:
            parser.error(f"{where}: {name}: {e}")
    return values


def _on_command_line(parser: Parser, option: Option, given: Sequence[str]) -> bool:
    """Whether ``given`` has one of ``option``'s flags (its ``--no-`` form too)."""
    flags = [
        *option.flags,
        *(f"--{key}" for key, s in parser.settings.items() if s.option == option),
    ]
    return any(token == flag or token.startswith(flag + "=") for token in given for flag in flags)


def _converted(option: Option, value: Any) -> Any:
    """``value`` as the option's flag would have made it."""
    if option.kind == "optional" and isinstance(value, bool):  # render = true
        return value
    if option.switch:
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not true or false")
        return value
    many = option.kind == "list"
    if isinstance(value, list) != many:
        raise ValueError("a list of values" if many else f"{value!r} is one value, not a list")
    items = value if many else [value]
    converted = []
    for item in items:
        if isinstance(item, (dict, list, bool)):
            raise ValueError(f"{item!r} is not a value this option takes")
        converted.append(flag_type(option.check)(str(item)))
    return converted if many else converted[0]
