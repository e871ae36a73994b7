"""Call regions written as one JSON array of calls (Granite's ``[{...}, {...}]``).

The engine reads such a region character by character, as vLLM's engine does: an
optional run of whitespace and ``[``, then elements, each a JSON object (strings and
escapes tracked, brackets counted) that becomes one call; ``,`` and whitespace between
them; ``]`` ends the region and what follows is content. Anything else where an element
or the array should start gives the region up: from there the text is content.
"""

from __future__ import annotations

import re

from parsers.engine.core import CALL_ARGS, CALL_END, CALL_START, CONTENT, TEXT, EngineState, Event

_WS = " \t\r\n"
# Where an element's reading may change: a quote or backslash in a string, a quote or a
# bracket outside one.
_IN_STRING = re.compile(r'["\\]')
_OUTSIDE = re.compile(r'["{}\[\]]')


class ArrayEngineState(EngineState):
    """The engine state of a format whose call regions are JSON arrays: whether the
    array opened, whether an element is open, and the element's JSON reading."""

    array_started: bool = False
    in_element: bool = False
    depth: int = 0
    in_string: bool = False
    escape: bool = False

    def call_open(self) -> bool:
        return self.in_element

    def array_text(self, text: str) -> list[Event]:
        events: list[Event] = []
        i, size = 0, len(text)
        while i < size:
            if self.state == CONTENT:
                events.append(Event(TEXT, text[i:], self.tool_index))
                break
            if self.in_element:
                end = self._element(text, i)
                events.append(Event(CALL_ARGS, text[i:end], self.tool_index))
                if not self.in_element:
                    events.append(Event(CALL_END, "", self.tool_index))
                i = end
                continue
            ch = text[i]
            i += 1
            if ch in _WS or (ch == "," and self.array_started):
                continue
            if ch == "[" and not self.array_started:
                self.array_started = True
            elif ch == "{" and self.array_started:
                self.tool_index += 1
                self.in_element, self.depth, self.in_string, self.escape = True, 0, False, False
                events.append(Event(CALL_START, "", self.tool_index))
                i -= 1  # the brace is the element's first character
            else:
                # ``]`` closes the array: what follows is content; anything else is
                # no array, so this character and the rest are content.
                if not (ch == "]" and self.array_started):
                    i -= 1
                self.state, self.array_started = CONTENT, False
        return events

    def _element(self, text: str, i: int) -> int:
        """Read the open element from ``i``; where it closes (just past its ``}``), or
        the end of the text."""
        size = len(text)
        while i < size:
            if self.escape:
                self.escape = False
                i += 1
                continue
            found = (_IN_STRING if self.in_string else _OUTSIDE).search(text, i)
            if found is None:
                return size
            ch = found.group()
            i = found.end()
            if self.in_string:
                if ch == "\\":
                    self.escape = True
                else:
                    self.in_string = False
            elif ch == '"':
                self.in_string = True
            elif ch in "{[":
                self.depth += 1
            else:
                self.depth = max(self.depth - 1, 0)
                if ch == "}" and self.depth == 0:
                    self.in_element = False
                    return i
        return size
