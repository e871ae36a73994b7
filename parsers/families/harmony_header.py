"""What a Harmony message header says, read as vLLM 0.33.0's ``oss-harmony`` reads it.

The package reads a header only at its ``<|message|>``, but asking it costs ~30 µs for
every token of the header (its ``StreamableParser`` encodes a marker afresh per token),
so a header of 30,000 ids cost the one chunk that closed it most of a second. Its rules
are few and read the header's text once, so they are kept here, each a linear pass in C
(``str`` methods and patterns without backtracking): a header of 30,000 ids is read in
a few milliseconds. tests/test_gptoss.py checks them against the package header by
header, odd whitespace, extra channels and markers included.

The rules (oss-harmony 0.0.11, ``parse_header_from_string``): the first ``<|channel|>``
names the channel, up to whitespace or ``<`` (an empty one refuses the header); every
later one is dropped with what follows it the same way. The rest, trimmed, with a space
put before each ``<|constrain|>``, is split on ASCII whitespace. Without a given role
the first part is the role (an unknown one, when more follows or it starts with
``to=``, makes a tool message); a first part spelling the role is dropped. What is left
is at most a recipient and a content type: a last part starting with ``to=`` is the
recipient, and so is a part alone; of two, the first is the recipient and the last the
content type. ``to=`` is stripped from the recipient; any other part refuses the header.
"""

from __future__ import annotations

import re

from msgspec import Struct

_CHANNEL = "<|channel|>"
_CONSTRAIN = "<|constrain|>"
_TO = "to="
_ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})
# Unicode's White_Space, which the package's trim and channel end use (Python's
# ``str.isspace`` also takes U+001C..U+001F).
_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NOT_CHANNEL_END = f"[^<{re.escape(_WHITESPACE)}]*"
_CHANNEL_VALUE = re.compile(_NOT_CHANNEL_END)
_EXTRA_CHANNEL = re.compile(re.escape(_CHANNEL) + _NOT_CHANNEL_END)
# A part between ASCII whitespace (space, tab, line feed, form feed, carriage return).
_PART = re.compile(r"[^ \t\n\x0c\r]+")


class MessageHeader(Struct, frozen=True):
    role: str
    channel: str | None
    recipient: str | None
    content_type: str | None


def read_header(text: str, role: str | None) -> MessageHeader | None:
    """The header ``text`` makes (``role``: the one the parser was given, if any), or
    None where the package refuses it."""
    channel = None
    at = text.find(_CHANNEL)
    if at >= 0:
        value_at = at + len(_CHANNEL)
        found = _CHANNEL_VALUE.match(text, value_at)
        channel = found.group() if found else ""
        if not channel:
            return None
        # The package drops later markers one at a time, each time from the start of the
        # text; one pass does the same, as a removal never forms a new marker (what
        # follows a removed one starts with whitespace or '<', and no tail of a marker
        # does).
        rest = text[value_at + len(channel) :]
        text = text[:at] + _EXTRA_CHANNEL.sub("", rest)
    text = text.strip(_WHITESPACE)
    if _CONSTRAIN in text:
        text = text.replace(_CONSTRAIN, " " + _CONSTRAIN).strip(_WHITESPACE)
    parts = _PART.findall(text)
    if role is None:
        if not parts:
            return None
        role = parts[0]
        if role not in _ROLES:
            if len(parts) == 1 and not role.startswith(_TO):
                return None
            del parts[0]
            role = "tool"
    if parts and parts[0] == role:
        del parts[0]
    if len(parts) > 2:
        return None
    recipient = content_type = None
    if len(parts) == 1 or (parts and parts[-1].startswith(_TO)):
        recipient = parts.pop()
    elif parts:
        content_type = parts.pop()
        recipient = parts.pop()
    if parts:
        return None
    if recipient is not None and recipient.startswith(_TO):
        recipient = recipient[len(_TO) :]
    return MessageHeader(role, channel, recipient, content_type)
