"""robots.txt's groups as RFC 9309 reads them, for protego to match paths in.

protego (0.7) reads three things otherwise than RFC 9309, so this module parses the
groups itself and hands protego only the group that applies to the crawler:

* a UTF-8 byte-order mark is part of the first line for protego, which then reads
  ``\\ufeffUser-agent: *`` as an unknown line: the first group is lost.  Here the
  mark is skipped, whole or in part, as Google skips it.
* protego matches a group against the whole ``User-Agent`` header, at any word's
  start and as a prefix: with the default header, groups for ``github``,
  ``dramatiq``, ``crawler`` or ``master`` applied.  RFC 9309 §2.2.1 matches the
  crawler's product token alone, case-insensitively: :func:`product_token`.
* protego ends a group at any line other than ``User-agent`` or ``Sitemap``:
  ``User-agent: FooBot``, ``Crawl-delay: 5``, ``User-agent: *``, ``Disallow: /`` let
  FooBot in.  RFC 9309 §2.2.4: other records must not end a group; only a rule
  (``Allow``, ``Disallow``) followed by a ``User-agent`` line does (§2.1).

protego still matches the paths (longest match, ``Allow`` on a tie, ``*`` and ``$``,
percent-encoding), reads the group's ``Crawl-delay`` and collects the ``Sitemap``
lines: :func:`parse` gives it the chosen group's lines under ``User-agent: *``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from protego import Protego

#: A UTF-8 byte-order mark: skipped at the start of a robots.txt, a part of it too.
BOM = b"\xef\xbb\xbf"
#: The keys of a group's lines, lower-case, with the misspellings Google accepts.
USER_AGENT_KEYS = frozenset({"user-agent", "useragent", "user agent"})
ALLOW_KEYS = frozenset({"allow"})
DISALLOW_KEYS = frozenset({"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"})
RULE_KEYS = ALLOW_KEYS | DISALLOW_KEYS
#: A group's line that is no rule (it does not end the group): kept for protego.
CRAWL_DELAY_KEYS = frozenset({"crawl-delay", "crawl delay"})
#: A line of the whole file, in or out of a group.
SITEMAP_KEYS = frozenset({"sitemap", "sitemaps", "site-map"})
#: RFC 9309's line endings (CR, LF, CRLF), and no others: ``str.splitlines`` would also
#: split at a form feed or U+2028 inside a path.
_NEWLINE = re.compile(r"\r\n|\r|\n")
#: RFC 9309's white space.
_SPACE = " \t"
#: A product token: letters, ``-`` and ``_`` (RFC 9309 §2.2.1), read from a string's start.
_TOKEN = re.compile(r"[A-Za-z_-]*")
#: The words of a line that has no colon (Google reads ``Disallow /x`` as its rule).
_WORDS = re.compile(r"[^ \t]+")
#: What every crawler obeys when no group names its product token.
EVERY_AGENT = "*"


@dataclass
class Group:
    """A group of a robots.txt: its ``User-agent`` lines' product tokens (lower-case,
    ``*`` for every crawler, empty for a value that holds none) and its lines, each
    ``(key, value)`` with the key spelt as protego reads it."""

    agents: list[str] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)
    #: Whether a rule was read: the next ``User-agent`` line starts a new group.
    ruled: bool = False


def product_token(user_agent: str) -> str:
    """The product token of a crawler sending ``user_agent``, the name robots.txt groups
    are matched against (RFC 9309 §2.2.1): the header's leading letters, ``-`` and ``_``,
    so its first product's name (``dramatiq-crawler`` for ``dramatiq-crawler/0.1
    (+https://...)``).  Empty when the header starts otherwise: only ``*`` applies."""
    return _leading_token(user_agent.strip())


def _leading_token(text: str) -> str:
    match = _TOKEN.match(text)
    return match.group() if match else ""


def parse(body: bytes, user_agent: str) -> Protego:
    """The rules of the robots.txt ``body`` for a crawler sending ``user_agent``, as a
    :class:`Protego` whose one group (``*``) holds them: ask it with any agent.

    Parameters:
      body(bytes): The robots.txt as fetched (UTF-8; bytes that are not are replaced).
      user_agent(str): The crawl's ``User-Agent`` header (:func:`product_token`).
    """
    text = skip_bom(body).decode("utf-8", "replace")
    found, sitemaps = groups(text)
    lines = ["User-agent: *"]
    for key, value in rules_for(found, product_token(user_agent)):
        lines.append(f"{key}: {_one_line(value)}")
    lines += [f"Sitemap: {_one_line(url)}" for url in sitemaps]
    return Protego.parse("\n".join(lines))


#: The longest robots.txt whose rules :func:`parsed` keeps (most are a few hundred bytes).
KEPT_BODY = 64 * 1024


def parsed(body: bytes, user_agent: str) -> Protego:
    """:func:`parse`, its rules kept for the next pages of the host (or of another host
    with the same robots.txt), which ask for them again on each page: a
    :class:`Protego` is only read once made.  A body over :data:`KEPT_BODY` is parsed
    each time, never kept."""
    if len(body) > KEPT_BODY:
        return parse(body, user_agent)
    return _kept(body, user_agent)


@functools.lru_cache(maxsize=256)
def _kept(body: bytes, user_agent: str) -> Protego:
    return parse(body, user_agent)


def skip_bom(body: bytes) -> bytes:
    """``body`` without a UTF-8 byte-order mark, or the start of one, at its start."""
    for size in range(len(BOM), 0, -1):
        if body.startswith(BOM[:size]):
            return body[size:]
    return body


def groups(text: str) -> tuple[list[Group], list[str]]:
    """The groups of the robots.txt ``text`` in order, and its ``Sitemap`` lines.

    A group is one or more ``User-agent`` lines, then rules; it ends where a
    ``User-agent`` line follows a rule (RFC 9309 §2.1).  Empty lines, comments, unknown
    lines, ``Sitemap`` and ``Crawl-delay`` lines end nothing (§2.2.4).  Rules before the
    first ``User-agent`` line are in no group: ignored (§2.2.2).
    """
    found: list[Group] = []
    sitemaps: list[str] = []
    group: Group | None = None
    for line in _NEWLINE.split(text):
        key, value = key_and_value(line)
        if key in USER_AGENT_KEYS:
            if group is None or group.ruled:
                group = Group()
                found.append(group)
            group.agents.append(agent_of(value))
        elif key in SITEMAP_KEYS:
            if value:
                sitemaps.append(value)
        elif group is not None and key in RULE_KEYS:
            group.lines.append(("Allow" if key in ALLOW_KEYS else "Disallow", value))
            group.ruled = True
        elif group is not None and key in CRAWL_DELAY_KEYS:
            group.lines.append(("Crawl-delay", value))
    return found, sitemaps


def key_and_value(line: str) -> tuple[str, str]:
    """A line's key (lower-case) and value, without its comment and the white space
    around them; ``("", "")`` for a line that has none.  A line with no colon is read as
    its two words, as Google reads ``Disallow /x``; with more words it has none."""
    line = line.split("#", 1)[0].strip(_SPACE)
    key, colon, value = line.partition(":")
    if not colon:
        words = _WORDS.findall(line)
        if len(words) != 2:
            return "", ""
        key, value = words
    key = key.strip(_SPACE).lower()
    return (key, value.strip(_SPACE)) if key else ("", "")


def agent_of(value: str) -> str:
    """The product token of a ``User-agent`` line's ``value``, lower-case: its leading
    letters, ``-`` and ``_`` (``Foo Bar`` and ``Foo/2.1`` name ``foo``, as Google reads
    them); ``*`` for every crawler (also ``* anything``); empty when it names none."""
    if value[:1] == EVERY_AGENT and value[1:2] in ("", " ", "\t"):
        return EVERY_AGENT
    return _leading_token(value).lower()


def rules_for(found: list[Group], token: str) -> list[tuple[str, str]]:
    """The lines of the groups that apply to the product token ``token``: the groups
    naming it, case-insensitively, merged in order (RFC 9309 §2.2.1); when none does,
    the ``*`` groups merged; when there are none either, no rule applies.  A group
    naming the token with no rules allows everything: the ``*`` groups do not apply."""
    token = token.lower()
    named = [group for group in found if token and token in group.agents]
    chosen = named or [group for group in found if EVERY_AGENT in group.agents]
    return [line for group in chosen for line in group.lines]


def _one_line(value: str) -> str:
    """``value`` as one line protego reads back whole: its white space and unprintable
    characters percent-encoded (UTF-8), which protego would have encoded so anyway
    before comparing; protego splits at more line endings than RFC 9309 and strips
    more white space."""
    return "".join(
        char if char.isprintable() and not char.isspace() else _percent_encoded(char)
        for char in value
    )


def _percent_encoded(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
