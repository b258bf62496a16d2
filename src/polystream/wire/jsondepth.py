"""The nesting bound of JSON texts, checked before they are parsed.

msgspec parses nested arrays and objects recursively and gives up with a
:class:`RecursionError` near the interpreter's recursion limit (about 1,000 levels,
less when the call stack is already deep); every walker of a parsed value recurses
too. polystream therefore bounds the nesting of every JSON text it reads from a peer
(stream events, array elements, request bodies) at :data:`DEFAULT_MAX_DEPTH` levels
and reports a deeper one as a typed error before parsing it.

The check is cheap where it matters: a text of at most ``max_depth`` bytes, or with
at most ``max_depth`` opening brackets in all (two ``count`` calls, in C), cannot nest
deeper, and only a text with more opening brackets is scanned (bracket by bracket,
each string skipped whole by a regular expression), stopping at the first bracket
past the bound.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DepthGuard",
    "JSONTooDeep",
    "body_error",
    "decode_body",
    "decode_bounded",
    "too_deep",
]

DEFAULT_MAX_DEPTH: Final = 128
"""Deepest nesting accepted in one JSON text (the outermost object or array is level
1). Real provider events and request bodies nest fewer than 20 levels."""

# A string (closed, or open to the end of the text: its brackets are not structure),
# or a bracket.
_TOKENS_BYTES: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
_TOKENS_STR: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
_OPENS: Final = frozenset(("{", "[", b"{", b"["))
_CLOSES: Final = frozenset(("}", "]", b"}", b"]"))


def too_deep(data: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> int | None:
    """Where ``data`` first nests deeper than ``max_depth``, or None.

    Returns:
        The index in ``data`` (bytes, or characters for a ``str``) of the first
        opening bracket past the bound; None when the text nests no deeper (or holds
        no JSON structure at all: strings are skipped, malformed text is not judged).
    """
    if len(data) <= max_depth:
        return None
    if isinstance(data, str):
        if not _more_opens(data, "{", "[", max_depth):
            return None
        return _scan(_TOKENS_STR.finditer(data), max_depth)
    if not _more_opens(data, b"{", b"[", max_depth):
        return None
    return _scan(_TOKENS_BYTES.finditer(data), max_depth)


def _more_opens(data: Any, brace: Any, bracket: Any, limit: int) -> bool:
    """Whether ``data`` holds more than ``limit`` opening brackets, counted with ``find``
    and stopped once past the limit (``count`` reads a long text whole, and for one
    character it is several times slower than ``find`` on CPython)."""
    seen = 0
    for opening in (brace, bracket):
        at = data.find(opening)
        while at != -1:
            seen += 1
            if seen > limit:
                return True
            at = data.find(opening, at + 1)
    return False


def _scan(
    tokens: Iterator[re.Match[str]] | Iterator[re.Match[bytes]], max_depth: int
) -> int | None:
    depth = 0
    for match in tokens:
        first = match.group()[:1]
        if first in _OPENS:
            depth += 1
            if depth > max_depth:
                return match.start()
        elif first in _CLOSES and depth:
            depth -= 1
    return None


class JSONTooDeep(msgspec.DecodeError):
    """A JSON body nests deeper than the bound (see :func:`decode_body`): like a
    malformed one, it cannot be read, so it is a :class:`msgspec.DecodeError`."""


_ANY: Final = msgspec.json.Decoder()


def decode_bounded(
    data: bytes | str,
    decoder: msgspec.json.Decoder[Any] = _ANY,
    *,
    what: str = "the JSON text",
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Parse ``data`` with ``decoder`` (default: any JSON value), its nesting bounded:
    for JSON that a caller reads as it does malformed JSON when too deep (tool
    arguments written into another dialect, say).

    Raises:
        JSONTooDeep: ``data`` nests deeper than ``max_depth`` (the message names
            ``what`` and where); a :class:`msgspec.DecodeError`, as for malformed JSON.
        msgspec.DecodeError: ``data`` is not valid JSON.
    """
    deep = too_deep(data, max_depth)
    if deep is not None:
        unit = "character" if isinstance(data, str) else "byte"
        raise JSONTooDeep(f"{what} nests deeper than {max_depth} levels (at {unit} {deep})")
    return decoder.decode(data)


def decode_body(body: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse a request body (the gateway's and the emulator's), its nesting bounded.

    Raises:
        JSONTooDeep: ``body`` nests deeper than ``max_depth`` (its message says
            where); a :class:`msgspec.DecodeError`, as for malformed JSON.
        msgspec.DecodeError: ``body`` is not valid JSON.
    """
    return decode_bounded(body, what="the request body", max_depth=max_depth)


def body_error(exc: msgspec.DecodeError) -> str:
    """What a client is told of a body :func:`decode_body` could not read."""
    return str(exc) if isinstance(exc, JSONTooDeep) else "the request body is not valid JSON"


# Brackets only: every opening one made "[", every closing one "]", the rest deleted.
_TO_BRACKETS: Final = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"{}[]")


class DepthGuard:
    """Whether the JSON texts a stream completes in a chunk may nest deeper than
    ``max_depth``, for a framing that hands each text over whole (SSE events): a
    cheap test of the chunk as a whole, so that only a chunk that may hold a text too
    deep has its texts checked one by one (with :func:`too_deep`).

    The chunk's brackets are kept (``bytes.translate``, in C), opening ones made ``[``
    and closing ones ``]``, after those of the texts still open before it (``carry``).
    While they hold at most ``max_depth`` opening brackets, nothing can nest deeper.
    Otherwise adjacent pairs ``[]`` are removed, pass after pass: a pair around ``k``
    nested pairs goes in pass ``k + 1``, so nothing nests deeper than the number of
    passes plus the opening brackets left unmatched. Brackets inside strings count
    too: they can only make the answer "maybe" (then each text is checked exactly).
    """

    __slots__ = ("_carry", "_limit")

    def __init__(self, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self._limit = max_depth
        self._carry = b""

    def reset(self) -> None:
        """Forget the texts still open (the framing starts afresh)."""
        self._carry = b""

    def feed(self, data: bytes) -> bool:
        """Take the next chunk; True when a text completed in it may nest deeper than
        ``max_depth`` (False: none does)."""
        brackets = data.translate(_TO_BRACKETS, _NOT_BRACKETS)
        if self._carry:
            brackets = self._carry + brackets
        limit = self._limit
        if brackets.count(91) <= limit and len(brackets) <= 4 * limit:  # 91: "["
            # The brackets so far are kept as they are, closing ones too (a text still
            # open holds at most these), up to a bound: then they are reduced.
            self._carry = brackets
            return False
        passes = 0
        while b"[]" in brackets:
            if passes == limit:
                # Deeper than the bound: the texts completed here are checked, and so
                # will the ones still open be, when they complete.
                self._carry = b"[" * (limit + 1)
                return True
            brackets = brackets.replace(b"[]", b"")
            passes += 1
        # What is left is "]" * a + "[" * b: the text still open holds at most those b.
        opens = brackets.count(91)
        if passes + opens > limit:
            self._carry = b"[" * (limit + 1)
            return True
        self._carry = b"[" * opens
        return False
