"""The incrementally streamed JSON array: Gemini's default ``streamGenerateContent``
framing, sans-I/O.

Without ``?alt=sse`` Gemini answers with one JSON array whose elements (partial
``GenerateContentResponse`` objects, pretty-printed) arrive over time::

    [{
      "candidates": [...]
    }
    ,
    {
      "candidates": [...]
    }
    ]

:class:`JSONArrayDecoder` returns each element's exact bytes as soon as the element
is complete, whatever the chunking. It checks the array's *structure* (brackets,
commas, strings, nesting); the elements' own JSON is parsed by the caller, once.

The scanner jumps between structural characters with compiled regular expressions,
so its cost is per string and bracket, not per byte.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from polystream.errors import (
    BufferLimitExceeded,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTruncated,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ELEMENT_SIZE",
    "JSONArrayDecoder",
    "JSONArrayEncoder",
    "JSONElement",
]

DEFAULT_MAX_ELEMENT_SIZE: Final = 64 * 1024 * 1024
"""Largest element accepted (64 MiB): an element may hold inline image or audio data."""

DEFAULT_MAX_DEPTH: Final = 256
"""Deepest nesting accepted inside one element. Real chunks nest fewer than 20 levels."""

_BOM: Final = b"\xef\xbb\xbf"
_WS: Final = frozenset(b" \t\r\n")
# Inside an element outside strings, only these bytes change the scanner's state.
_STRUCTURAL: Final = re.compile(rb'["{}\[\]]')
# Inside a string, only the closing quote and escapes matter.
_IN_STRING: Final = re.compile(rb'["\\]')
# A scalar element ends at whitespace, a comma or the closing bracket.
_SCALAR_END: Final = re.compile(rb"[\s,\]]")
_NOT_WS: Final = re.compile(rb"[^ \t\r\n]")

# Scanner states.
_BEFORE_ARRAY: Final = 0  # waiting for "["
_FIRST: Final = 1  # after "[": an element or "]"
_NEXT: Final = 2  # after ",": an element
_AFTER: Final = 3  # after an element: "," or "]"
_IN_ELEMENT: Final = 4  # inside an object/array element
_IN_SCALAR: Final = 5  # inside a top-level scalar element (number, literal)
_DONE: Final = 6  # after "]": only whitespace


class JSONElement(msgspec.Struct, frozen=True, gc=False):
    """One complete array element.

    Fields:
        data: The element's exact bytes (valid JSON structure, not yet parsed).
        offset: Byte offset of the element's first byte in the input.
        index: 0-based position of the element in the array.
    """

    data: bytes
    offset: int
    index: int


class JSONArrayDecoder:
    """Incremental decoder for a streamed JSON array.

    Args:
        max_element_size: Largest element accepted, in bytes.
        max_depth: Deepest nesting accepted inside an element.

    Raises (from :meth:`feed` and :meth:`close`):
        RemoteProtocolError: A syntax error (names the byte offset).
        BufferLimitExceeded: An element grew past ``max_element_size`` or nested
            deeper than ``max_depth``.
        StreamTruncated: :meth:`close` before the closing ``]``.
    """

    __slots__ = (
        "_closed",
        "_count",
        "_depth",
        "_elem_start",
        "_failed",
        "_in_string",
        "_max_depth",
        "_max_size",
        "_offset",
        "_parts",
        "_parts_size",
        "_pending_escape",
        "_seen_any",
        "_state",
    )

    def __init__(
        self,
        *,
        max_element_size: int = DEFAULT_MAX_ELEMENT_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        self._max_size = max_element_size
        self._max_depth = max_depth
        self._state = _BEFORE_ARRAY
        self._offset = 0  # absolute offset of the next chunk's first byte
        self._parts: list[bytes] = []  # pieces of the element in progress
        self._parts_size = 0
        self._elem_start = 0
        self._depth = 0
        self._in_string = False
        self._pending_escape = False  # a backslash ended the previous chunk
        self._count = 0
        self._seen_any = False
        self._closed = False
        self._failed: RemoteProtocolError | None = None

    @property
    def elements_decoded(self) -> int:
        """How many elements have been returned so far."""
        return self._count

    def feed(self, data: bytes) -> list[JSONElement]:
        """Consume a chunk and return every element it completed."""
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect="json_array")
        if self._failed is not None:
            raise self._failed
        if not data:
            return []
        try:
            return self._feed(data)
        except RemoteProtocolError as exc:
            self._failed = exc
            self._parts = []
            raise

    def close(self) -> list[JSONElement]:
        """Signal the end of input. Safe to call twice.

        Raises:
            StreamTruncated: The array was not closed (or was empty input).
        """
        if self._closed:
            return []
        self._closed = True
        if self._failed is not None:
            raise self._failed
        if self._state != _DONE:
            where = "inside an element" if self._state in (_IN_ELEMENT, _IN_SCALAR) else ""
            what = "no JSON array in the input" if not self._seen_any else "JSON array not closed"
            raise StreamTruncated(
                f"{what}{' (' + where + ')' if where else ''}",
                dialect="json_array",
                event_index=self._count,
                byte_offset=self._elem_start if where else self._offset,
            )
        return []

    # -- internals ---------------------------------------------------------------------

    def _error(self, message: str, offset: int) -> RemoteProtocolError:
        return RemoteProtocolError(
            message, dialect="json_array", event_index=self._count, byte_offset=offset
        )

    def _feed(self, data: bytes) -> list[JSONElement]:
        out: list[JSONElement] = []
        base = self._offset
        self._offset += len(data)
        if not self._seen_any:
            stripped = data.lstrip(b" \t\r\n")
            if stripped:
                self._seen_any = True
                if stripped.startswith(_BOM):  # tolerate a BOM before the array
                    data = stripped[3:]
                    base = self._offset - len(data)
        pos = 0
        n = len(data)
        while pos < n:
            state = self._state
            if state == _IN_ELEMENT:
                pos = self._scan_element(data, pos, base, out)
                continue
            if state == _IN_SCALAR:
                m = _SCALAR_END.search(data, pos)
                end = m.start() if m else n
                self._append(data[pos:end], base)
                if m is None:
                    return out
                self._emit(out)
                self._state = _AFTER
                pos = end
                continue
            m = _NOT_WS.search(data, pos)
            if m is None:
                return out
            pos = m.start()
            c = data[pos]
            if state == _BEFORE_ARRAY:
                if c != 91:  # "["
                    raise self._error(f"expected '[' to open the array, got {chr(c)!r}", base + pos)
                self._state = _FIRST
                pos += 1
            elif state in (_FIRST, _NEXT):
                if c == 93 and state == _FIRST:  # "]" : an empty array
                    self._state = _DONE
                    pos += 1
                elif c in (123, 91):  # "{" or "["
                    self._start_element(base + pos)
                    self._depth = 1
                    self._state = _IN_ELEMENT
                    self._append(data[pos : pos + 1], base)
                    pos += 1
                elif c == 34:  # '"' : a string element
                    self._start_element(base + pos)
                    self._depth = 0
                    self._in_string = True
                    self._state = _IN_ELEMENT
                    self._append(data[pos : pos + 1], base)
                    pos += 1
                elif c in b"-0123456789tfn":
                    self._start_element(base + pos)
                    self._state = _IN_SCALAR
                else:
                    raise self._error(f"expected an array element, got {chr(c)!r}", base + pos)
            elif state == _AFTER:
                if c == 44:  # ","
                    self._state = _NEXT
                elif c == 93:  # "]"
                    self._state = _DONE
                else:
                    raise self._error(
                        f"expected ',' or ']' after an element, got {chr(c)!r}", base + pos
                    )
                pos += 1
            else:  # _DONE
                raise self._error("data after the closing ']'", base + pos)
        return out

    def _start_element(self, offset: int) -> None:
        self._elem_start = offset
        self._parts = []
        self._parts_size = 0
        self._in_string = False
        self._pending_escape = False

    def _append(self, piece: bytes, base: int) -> None:
        self._parts_size += len(piece)
        if self._parts_size > self._max_size:
            raise BufferLimitExceeded(
                f"array element larger than max_element_size={self._max_size} bytes",
                dialect="json_array",
                event_index=self._count,
                byte_offset=self._elem_start,
            )
        self._parts.append(piece)

    def _emit(self, out: list[JSONElement]) -> None:
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        out.append(JSONElement(data, self._elem_start, self._count))
        self._count += 1
        self._parts = []
        self._parts_size = 0

    def _scan_element(self, data: bytes, pos: int, base: int, out: list[JSONElement]) -> int:
        """Scan inside an element from ``pos``; return where scanning stopped."""
        n = len(data)
        start = pos
        depth = self._depth
        in_string = self._in_string
        if self._pending_escape:
            # The escaped character is the first byte of this chunk.
            self._pending_escape = False
            pos += 1
        while pos < n:
            if in_string:
                m = _IN_STRING.search(data, pos)
                if m is None:
                    pos = n
                    break
                p = m.start()
                if data[p] == 92:  # backslash: skip the escaped byte
                    if p + 1 >= n:
                        self._pending_escape = True
                        pos = n
                        break
                    pos = p + 2
                    continue
                in_string = False
                pos = p + 1
                if depth == 0:  # a string element ended
                    self._depth = 0
                    self._in_string = False
                    self._append(data[start:pos], base)
                    self._emit(out)
                    self._state = _AFTER
                    return pos
                continue
            m = _STRUCTURAL.search(data, pos)
            if m is None:
                pos = n
                break
            p = m.start()
            c = data[p]
            if c == 34:
                in_string = True
            elif c in (123, 91):
                depth += 1
                if depth > self._max_depth:
                    raise BufferLimitExceeded(
                        f"element nested deeper than max_depth={self._max_depth}",
                        dialect="json_array",
                        event_index=self._count,
                        byte_offset=base + p,
                    )
            else:
                depth -= 1
                if depth == 0:
                    pos = p + 1
                    self._depth = 0
                    self._in_string = False
                    self._append(data[start:pos], base)
                    self._emit(out)
                    self._state = _AFTER
                    return pos
            pos = p + 1
        self._depth = depth
        self._in_string = in_string
        self._append(data[start:n], base)
        return n


class JSONArrayEncoder:
    """Writes a streamed JSON array, element by element.

    Args:
        separator: Bytes written between elements (after the comma is part of it).
            The default reproduces Gemini's wire form: each element on its own lines,
            separated by a line holding only a comma, with CRLF line ends.
        prefix: Bytes that open the array.
        suffix: Bytes that close the array.
    """

    __slots__ = ("_count", "_prefix", "_separator", "_suffix")

    def __init__(
        self,
        *,
        separator: bytes = b"\r\n,\r\n",
        prefix: bytes = b"[",
        suffix: bytes = b"\r\n]",
    ) -> None:
        self._separator = separator
        self._prefix = prefix
        self._suffix = suffix
        self._count = 0

    def element(self, data: bytes) -> bytes:
        """Encode one element (already-serialised JSON)."""
        self._count += 1
        if self._count == 1:
            return self._prefix + data
        return self._separator + data

    def close(self) -> bytes:
        """Close the array (an empty array if no element was written)."""
        if self._count == 0:
            return self._prefix + b"]"
        return self._suffix
