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
is complete, whatever the chunking. It checks the array's *structure* (matching
brackets, commas, strings, nesting, and top-level scalars such as ``12`` or ``true``);
the inside of an object or array element (its colons and commas) is parsed by the
caller, once.

Deliberate choices:

* One UTF-8 BOM is accepted before the array (RFC 8259 §8.1 lets parsers ignore it),
  also after leading whitespace, even when the BOM is split across chunks.
* When a chunk completes some elements and then hits an error, ``feed`` returns those
  elements and the error is raised by the next ``feed`` or ``close``: the elements
  before an error are the same whatever the chunking, and none is lost.

The scanner jumps between structural characters with compiled regular expressions,
so its cost is per string and bracket, not per byte. Before it, a fast path takes a
whole object or array element at once: raw CR and LF cannot occur inside a JSON
string (RFC 8259 §7), so in Gemini's layout (a line holding only ``,`` between
elements, ``\r\n]`` at the end) the bytes before the next ``\n,`` or ``\n]``, or
before the end of the chunk, are a candidate element; msgspec validates it in one
pass, and anything it does not accept (another layout, an incomplete or malformed
element, an element past a limit) goes through the scanner, which then decides. An
element split across chunks is scanned as it arrives (so errors are raised by the
chunk that holds them) and finished the same way by the chunk that holds its end.

A caller that parses every element anyway can hand its own parser to the decoder
(``decode=``): the fast path then parses the candidate with it instead of validating it,
and the element carries the parsed value (:attr:`JSONElement.value`), so each element
is parsed once. The parser must accept every valid JSON text and reject (raise
:class:`msgspec.DecodeError`) everything else; it may reject more than that (msgspec's
builtin decoder also rejects invalid UTF-8 and out-of-range numbers, which validation
lets through): such an element goes to the scanner, which returns it without a value,
exactly as it would have without the parser.

A caller that recognises most elements by their exact bytes can read those itself,
between elements, and tell the decoder what it read (:attr:`JSONArrayDecoder.idle`,
:meth:`JSONArrayDecoder.skip`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import msgspec

from polystream.errors import (
    BufferLimitExceeded,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTruncated,
)
from polystream.wire._pieces import PIECES, join_recent
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH as JSON_MAX_DEPTH

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ELEMENT_SIZE",
    "JSONArrayDecoder",
    "JSONArrayEncoder",
    "JSONElement",
]

DEFAULT_MAX_ELEMENT_SIZE: Final = 64 * 1024 * 1024
"""Largest element accepted (64 MiB): an element may hold inline image or audio data."""

DEFAULT_MAX_DEPTH: Final = JSON_MAX_DEPTH
"""Deepest nesting accepted inside one element (128, as for every JSON text polystream
reads: see :mod:`polystream.wire.jsondepth`). Real chunks nest fewer than 20 levels."""

_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"  # RFC 8259 §2: the only insignificant whitespace
# Inside an element outside strings, only these bytes change the scanner's state.
_STRUCTURAL: Final = re.compile(rb'["{}\[\]]')
# A scalar element ends at whitespace, a comma, the closing bracket, or a byte that
# cannot be part of it (then the structure check after it reports the error).
_SCALAR_END: Final = re.compile(rb'[ \t\r\n,\]\[{}"]')
# RFC 8259 §6 (number) and §3 (literals): what a complete scalar element must be.
_SCALAR: Final = re.compile(
    rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null"
)
_NOT_WS: Final = re.compile(rb"[^ \t\r\n]")
# Validates a candidate element without building Python objects (msgspec parses what
# it skips, so it rejects malformed or truncated JSON and trailing bytes).
_VALIDATE: Final = msgspec.json.Decoder(msgspec.Raw)
_CLOSER: Final = {123: 125, 91: 93}  # "{" -> "}", "[" -> "]"
# A chunk shorter than this that continues an element is scanned: trying the fast path
# on it costs about what scanning it does.
_CONTINUE_MIN: Final = 128

# Scanner states.
_BEFORE_ARRAY: Final = 0  # waiting for "["
_FIRST: Final = 1  # after "[": an element or "]"
_NEXT: Final = 2  # after ",": an element
_AFTER: Final = 3  # after an element: "," or "]"
_IDLE: Final = frozenset((_FIRST, _NEXT, _AFTER))  # where a caller may take over
_IN_ELEMENT: Final = 4  # inside an object/array/string element
_IN_SCALAR: Final = 5  # inside a top-level scalar element (number, literal)
_DONE: Final = 6  # after "]": only whitespace


class JSONElement(msgspec.Struct, frozen=True, gc=False):
    """One complete array element.

    Fields:
        data: The element's exact bytes (valid JSON structure, not yet parsed).
        offset: Byte offset of the element's first byte in the input.
        index: 0-based position of the element in the array.
        value: The element parsed by the decoder's ``decode`` parser when the fast
            path took it whole; ``msgspec.UNSET`` otherwise (no parser, or an element
            the scanner returned): the caller then parses ``data`` itself.
    """

    data: bytes
    offset: int
    index: int
    value: Any = msgspec.UNSET


class JSONArrayDecoder:
    """Incremental decoder for a streamed JSON array.

    Args:
        max_element_size: Largest element accepted, in bytes; see
            :data:`DEFAULT_MAX_ELEMENT_SIZE`.
        max_depth: Deepest nesting accepted inside an element (the element's own
            brackets count as depth 1); see :data:`DEFAULT_MAX_DEPTH`.
        decode: A JSON parser (bytes -> value) for the elements the fast path takes
            whole; see the module docstring. It changes which elements carry a
            ``value``, never the elements themselves nor any error.

    Raises (from :meth:`feed` and :meth:`close`):
        RemoteProtocolError: A syntax error (names the byte offset).
        BufferLimitExceeded: An element grew past ``max_element_size`` or nested
            deeper than ``max_depth``.
        StreamTruncated: :meth:`close` before the closing ``]``.

    After an error the decoder is unusable and raises that error again (a copy: see
    :meth:`~polystream.errors.ProtocolError.again`); memory stays bounded by the limits.
    """

    __slots__ = (
        "_closed",
        "_cont_missed",
        "_count",
        "_decode",
        "_elem_start",
        "_failed",
        "_fast_miss",
        "_head",
        "_in_string",
        "_keep_value",
        "_max_depth",
        "_max_size",
        "_offset",
        "_parts",
        "_parts_joined",
        "_parts_size",
        "_pending_escape",
        "_seen_any",
        "_stack",
        "_state",
    )

    def __init__(
        self,
        *,
        max_element_size: int = DEFAULT_MAX_ELEMENT_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        decode: Callable[[bytes], Any] | None = None,
    ) -> None:
        if max_element_size < 1 or max_depth < 1:
            raise ValueError("limits must be positive")
        self._decode: Callable[[bytes], Any] = _VALIDATE.decode if decode is None else decode
        self._keep_value = decode is not None
        self._max_size = max_element_size
        self._max_depth = max_depth
        self._state = _BEFORE_ARRAY
        self._offset = 0  # absolute offset of the next byte to scan
        self._head = b""  # a possible partial BOM before the array, held back
        self._parts: list[bytes] = []  # pieces of the element in progress
        self._parts_joined = 0  # how many _parts items are joins (wire._pieces)
        self._parts_size = 0
        self._elem_start = 0
        self._stack = bytearray()  # open brackets of the element in progress
        self._in_string = False
        self._pending_escape = False  # a backslash ended the previous chunk
        self._count = 0
        self._seen_any = False
        self._closed = False
        self._failed: RemoteProtocolError | None = None
        # Absolute offset of the end of the last candidate the fast path rejected: a
        # later element that finds the same end goes to the scanner at once, so each
        # byte is validated at most once in vain (no quadratic cost on other layouts).
        self._fast_miss = -1
        # The fast path also tries to finish an element begun in an earlier chunk, until
        # one such attempt fails for that element (then the scanner finishes it): the
        # bytes of an element are validated in vain at most once.
        self._cont_missed = False

    @property
    def elements_decoded(self) -> int:
        """How many elements have been returned so far."""
        return self._count

    @property
    def bytes_consumed(self) -> int:
        """How many input bytes have been fed so far."""
        return self._offset + len(self._head)

    @property
    def max_element_size(self) -> int:
        """The element size limit, in bytes."""
        return self._max_size

    @property
    def max_depth(self) -> int:
        """The nesting limit (the element's own brackets count as depth 1)."""
        return self._max_depth

    @property
    def idle(self) -> bool:
        """Whether the input so far ends between elements with nothing pending: after
        the ``[``, after a ``,``, or right after an element (see
        :attr:`after_element`), and any whitespace; no element under way, no error,
        not closed. Only then may a caller take elements itself (see :meth:`skip`)."""
        return self._state in _IDLE and self._failed is None and not self._closed

    def takeover(self) -> tuple[int, int, bool] | None:
        """For a caller that takes elements itself (see :meth:`skip`), what it needs in
        one call: None unless :attr:`idle`, else the :attr:`elements_decoded` and
        :attr:`bytes_consumed` so far and :attr:`after_element`."""
        if self.idle:
            return self._count, self.bytes_consumed, self._state == _AFTER
        return None

    @property
    def after_element(self) -> bool:
        """Whether the input so far ends right after an element (and any whitespace):
        a ``,`` or the closing ``]`` comes next."""
        return self._state == _AFTER

    def skip(self, size: int, elements: int, *, comma: bool = True) -> None:
        """Account for ``size`` bytes of input that the caller read itself, while
        :attr:`idle`: ``elements`` whole elements, each a valid JSON value within both
        limits, with whitespace and a comma between them; beginning with a comma if
        the decoder was :attr:`after_element`, and ending after a comma, or with
        ``comma=False`` right after an element. Those elements have the indexes this
        decoder would have given them. A caller that recognises most elements of its
        stream by their exact bytes saves building elements it would parse again.

        Raises:
            LocalProtocolError: The decoder is not idle.
        """
        if not self.idle:
            raise LocalProtocolError("skip() with input pending", dialect="json_array")
        self._offset += size
        self._count += elements
        if size:
            self._state = _NEXT if comma else _AFTER

    def feed(self, data: bytes) -> list[JSONElement]:
        """Consume a chunk and return every element it completed.

        Args:
            data: Any number of bytes, split anywhere.

        Returns:
            The elements this chunk completed, in order (possibly none). An object,
            array or string element is returned by the call that brings its last
            byte; a scalar (``12``, ``true``) by the call that brings the byte after it.

        Raises:
            RemoteProtocolError: A syntax error. If the same chunk completed elements
                before it, they are returned instead and the error is raised by the
                next call to ``feed`` or ``close``.
            BufferLimitExceeded: A limit was exceeded (same rule).
            LocalProtocolError: ``feed`` after ``close``.
        """
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect="json_array")
        if self._failed is not None:
            raise self._failed.again()
        if not data:
            return []
        out: list[JSONElement] = []
        try:
            self._feed(data, out)
        except RemoteProtocolError as exc:
            self._failed = exc.again()
            self._parts = []
            self._parts_joined = 0
            if not out:
                raise
        return out

    def close(self) -> list[JSONElement]:
        """Signal the end of input. Safe to call twice.

        Returns:
            Always an empty list (every element was returned by ``feed``).

        Raises:
            StreamTruncated: The array was not closed (or the input held no array).
            RemoteProtocolError: An error found by the last ``feed`` (raised again).
        """
        if self._closed:
            return []
        self._closed = True
        if self._failed is not None:
            raise self._failed.again()
        if self._head:
            # A partial BOM and nothing after it: it is garbage before the array.
            head, self._head = self._head, b""
            self._seen_any = True
            self._feed(head, [])
        if self._state != _DONE:
            inside = self._state in (_IN_ELEMENT, _IN_SCALAR)
            what = "JSON array not closed" if self._seen_any else "no JSON array in the input"
            raise StreamTruncated(
                f"{what} (inside an element)" if inside else what,
                dialect="json_array",
                event_index=self._count,
                byte_offset=self._elem_start if inside else self._offset,
            )
        return []

    # -- internals ---------------------------------------------------------------------

    def _error(self, message: str, offset: int) -> RemoteProtocolError:
        return RemoteProtocolError(
            message, dialect="json_array", event_index=self._count, byte_offset=offset
        )

    def _feed(self, data: bytes, out: list[JSONElement]) -> None:
        if not self._seen_any:
            data = self._head + data
            self._head = b""
            stripped = data.lstrip(_WHITESPACE)
            if not stripped:
                self._offset += len(data)
                return
            if len(stripped) < 3 and _BOM.startswith(stripped):
                # Maybe a BOM split across chunks: hold it until it is decided.
                self._offset += len(data) - len(stripped)
                self._head = stripped
                return
            self._seen_any = True
            if stripped.startswith(_BOM):  # tolerated once, before the array
                self._offset += len(data) - len(stripped) + 3
                data = stripped[3:]
        base = self._offset
        self._offset += len(data)
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
                    return
                self._emit_scalar(out)
                pos = end
                continue
            m = _NOT_WS.search(data, pos)
            if m is None:
                return
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
                    end = self._fast_element(data, pos, base, c, out)
                    if end:
                        pos = end
                        continue
                    self._start_element(base + pos)
                    self._stack.append(c)
                    self._state = _IN_ELEMENT
                    self._append(data[pos : pos + 1], base)
                    pos += 1
                elif c == 34:  # '"' : a string element
                    self._start_element(base + pos)
                    self._in_string = True
                    self._state = _IN_ELEMENT
                    self._append(data[pos : pos + 1], base)
                    pos += 1
                elif c in b"-0123456789tfn":
                    self._start_element(base + pos)
                    self._state = _IN_SCALAR
                elif c == 93:  # "]" right after ","
                    raise self._error("trailing comma before ']'", base + pos)
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

    def _start_element(self, offset: int) -> None:
        self._elem_start = offset
        self._parts = []
        self._parts_joined = 0
        self._parts_size = 0
        self._stack.clear()
        self._in_string = False
        self._pending_escape = False
        self._cont_missed = False

    def _append(self, piece: bytes, base: int) -> None:
        self._parts_size += len(piece)
        if self._parts_size > self._max_size:
            raise BufferLimitExceeded(
                f"array element larger than max_element_size={self._max_size} bytes",
                dialect="json_array",
                event_index=self._count,
                byte_offset=self._elem_start,
            )
        parts = self._parts
        parts.append(piece)
        if len(parts) - self._parts_joined >= PIECES:
            self._parts_joined = join_recent(parts, self._parts_joined)

    def _emit(self, out: list[JSONElement]) -> None:
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        out.append(JSONElement(data, self._elem_start, self._count))
        self._count += 1
        self._parts = []
        self._parts_joined = 0
        self._parts_size = 0
        self._state = _AFTER

    def _emit_scalar(self, out: list[JSONElement]) -> None:
        data = b"".join(self._parts)
        if _SCALAR.fullmatch(data) is None:
            shown = data[:40].decode("utf-8", "replace")
            raise self._error(f"invalid JSON value {shown!r}", self._elem_start)
        self._parts = [data]
        self._emit(out)

    def _fast_element(
        self, data: bytes, pos: int, base: int, opener: int, out: list[JSONElement]
    ) -> int:
        """Take the object/array element starting at ``data[pos]`` whole, if it is
        complete in ``data``, and the elements after it the same way; return where
        scanning resumes, or 0 when no element was taken (the scanner decides).

        The result is what the scanner would produce: a candidate is accepted only if
        it is one valid JSON value ending with the closer of its first bracket (so its
        end is the scanner's end), within ``max_element_size``, and holding fewer
        brackets than ``max_depth`` (so it cannot nest deeper). The separator found
        after it (whitespace, then the ``,`` or ``]`` that follows ``\n``) is consumed
        as the scanner would consume it.
        """
        n = len(data)
        taken = False
        max_size = self._max_size
        max_depth = self._max_depth
        while True:
            if base + pos < self._fast_miss:
                # The candidate rejected last is still the first one after pos (there
                # is none between): do not search again (no quadratic cost on compact
                # arrays).
                break
            sep = data.find(b"\n,", pos)
            if sep < 0:
                sep = data.find(b"\n]", pos)
                if sep < 0:
                    sep = n
            if base + sep == self._fast_miss:
                break
            end = sep
            while end > pos and data[end - 1] in _WHITESPACE:
                end -= 1
            if end - pos > max_size:
                break
            element = data[pos:end]
            if element[-1] != _CLOSER[opener] or (
                end - pos > max_depth and element.count(b"{") + element.count(b"[") > max_depth
            ):
                self._fast_miss = base + sep
                break
            try:
                value = self._decode(element)
            except msgspec.DecodeError:
                self._fast_miss = base + sep
                break
            self._elem_start = base + pos
            if self._keep_value:
                out.append(JSONElement(element, base + pos, self._count, value))
            else:
                out.append(JSONElement(element, base + pos, self._count))
            self._count += 1
            taken = True
            if sep == n:
                self._state = _AFTER
                return end
            # Only whitespace lies between the element and data[sep + 1].
            if data[sep + 1] == 93:  # "]"
                self._state = _DONE
                return sep + 2
            self._state = _NEXT
            pos = sep + 2
            if data.startswith(b"\r\n", pos):  # Google's "\r\n,\r\n" between elements
                pos += 2
            if pos < n and data[pos] in _WHITESPACE:
                m = _NOT_WS.search(data, pos)
                if m is None:
                    return n
                pos = m.start()
            if pos >= n:
                return n
            opener = data[pos]
            if opener not in (123, 91):  # not "{" or "[": the scanner's turn
                return pos
        return pos if taken else 0

    def _fast_continue(self, data: bytes, base: int, out: list[JSONElement]) -> int:
        """:meth:`_fast_element` for an object/array element begun in an earlier chunk
        (its bytes so far are in ``_parts``, already checked by the scanner); return
        where it ends in ``data``, or 0 to let the scanner continue."""
        n = len(data)
        sep = data.find(b"\n,")
        if sep < 0:
            sep = data.find(b"\n]")
            if sep < 0:
                sep = n
        end = sep
        while end > 0 and data[end - 1] in _WHITESPACE:
            end -= 1
        if end == 0 or data[end - 1] != _CLOSER[self._stack[0]]:
            return 0  # cheap refusals do not use up the attempt
        if self._parts_size + end > self._max_size:
            return 0  # the scanner reports the limit where it is crossed
        self._parts.append(data[:end])
        element = b"".join(self._parts)
        del self._parts[-1]
        if element.count(b"{") + element.count(b"[") <= self._max_depth:
            try:
                value = self._decode(element)
            except msgspec.DecodeError:
                # Not the element's end (a "\n," inside a string) or not valid: the
                # scanner goes on from where it stands.
                self._cont_missed = True
                return 0
            if self._keep_value:
                out.append(JSONElement(element, self._elem_start, self._count, value))
            else:
                out.append(JSONElement(element, self._elem_start, self._count))
            self._count += 1
            self._parts = []
            self._parts_joined = 0
            self._parts_size = 0
            self._stack.clear()
            self._in_string = False
            self._pending_escape = False
            self._state = _AFTER
            return end
        self._cont_missed = True  # deeper than the limit: the scanner reports it
        return 0

    def _scan_element(self, data: bytes, pos: int, base: int, out: list[JSONElement]) -> int:
        """Scan inside an element from ``pos``; return where scanning stopped."""
        if pos == 0 and self._stack and not self._cont_missed and len(data) >= _CONTINUE_MIN:
            end = self._fast_continue(data, base, out)
            if end:
                return end
        n = len(data)
        start = pos
        stack = self._stack
        in_string = self._in_string
        quote = escape = -2  # next '"' and '\\' at or after pos (-1: none; -2: unknown)
        if self._pending_escape:
            # The escaped character is the first byte of this chunk.
            self._pending_escape = False
            pos += 1
        while pos < n:
            if in_string:
                # memchr scans beat a regex on long strings (base64 inline data). The
                # next quote and backslash positions are cached, so that each byte is
                # scanned once even when a string holds many escapes.
                if quote != -1 and quote < pos:
                    quote = data.find(b'"', pos)
                if escape != -1 and escape < pos:
                    escape = data.find(b"\\", pos)
                if escape != -1 and (quote == -1 or escape < quote):
                    p = escape
                elif quote != -1:
                    p = quote
                else:
                    pos = n
                    break
                if data[p] == 92:  # backslash: skip the escaped byte
                    if p + 1 >= n:
                        self._pending_escape = True
                        pos = n
                        break
                    pos = p + 2
                    continue
                in_string = False
                pos = p + 1
                if not stack:  # a string element ended
                    self._in_string = False
                    self._append(data[start:pos], base)
                    self._emit(out)
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
                stack.append(c)
                if len(stack) > self._max_depth:
                    raise BufferLimitExceeded(
                        f"element nested deeper than max_depth={self._max_depth}",
                        dialect="json_array",
                        event_index=self._count,
                        byte_offset=base + p,
                    )
            else:
                if _CLOSER[stack[-1]] != c:
                    raise self._error(f"{chr(c)!r} does not close {chr(stack[-1])!r}", base + p)
                stack.pop()
                if not stack:
                    pos = p + 1
                    self._in_string = False
                    self._append(data[start:pos], base)
                    self._emit(out)
                    return pos
            pos = p + 1
        self._in_string = in_string
        self._append(data[start:n], base)
        return n


class JSONArrayEncoder:
    """Writes a streamed JSON array, element by element: the inverse of
    :class:`JSONArrayDecoder`.

    Args:
        separator: Bytes written between elements (the comma is part of it).
            The default reproduces Gemini's wire form: each element on its own lines,
            separated by a line holding only a comma, with CRLF line ends.
        prefix: Bytes that open the array.
        suffix: Bytes that close the array.
    """

    __slots__ = ("_closed", "_count", "_prefix", "_separator", "_suffix")

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
        self._closed = False

    def element(self, data: bytes) -> bytes:
        """Encode one element (already-serialised JSON).

        Raises:
            LocalProtocolError: The array was already closed.
        """
        return self._lead() + data

    def element_of(self, pieces: tuple[bytes, ...]) -> bytes:
        """:meth:`element` of the JSON text ``b"".join(pieces)``, joined in one pass.

        Raises:
            LocalProtocolError: The array was already closed.
        """
        return b"".join((self._lead(), *pieces))

    def _lead(self) -> bytes:
        """What comes before the next element (the prefix, else the separator)."""
        if self._closed:
            raise LocalProtocolError("element() after close()", dialect="json_array")
        self._count += 1
        return self._prefix if self._count == 1 else self._separator

    def close(self) -> bytes:
        """Close the array (an empty array if no element was written). A second call
        returns nothing."""
        if self._closed:
            return b""
        self._closed = True
        if self._count == 0:
            return self._prefix + b"]"
        return self._suffix
