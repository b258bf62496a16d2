"""Bare (non-SSE) text after SSE events, where Google writes a JSON error object: the
lines that are not SSE fields, collected until their braces balance, each text read
as a chunk in its place among the events."""

from __future__ import annotations

import re
from typing import Any, Final

from polystream.errors import BufferLimitExceeded, RemoteProtocolError
from polystream.events import Event
from polystream.wire._pieces import PIECES, join_recent
from polystream.wire.framing import BLANK
from polystream.wire.jsondepth import too_deep

from ._chunks import ChunkDecoder

# First bytes of the SSE lines Gemini sends (data:, event:, id:, retry:, comments, blank).
_SSE_LINE_STARTS: Final = frozenset(b"deir:\r\n")
# A line start (after LF) whose first byte is none of those.
_BARE_LINE: Final = re.compile(rb"\n[^deir:\r\n]")


class BareTextDecoder(ChunkDecoder):
    """:class:`~._chunks.ChunkDecoder` with the bare-text scan of the SSE framing
    (``_scan_bare``, before the framing's parser sees the bytes; ``_drain_bare``)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Bare (non-SSE) text after SSE events: Google writes a JSON error object there.
        self._scan_offset = 0
        # Whether a byte other than the blank ones that may open the stream (whitespace,
        # a UTF-8 BOM: see BLANK) has been scanned: those are never a bare line.
        self._scan_started = False
        self._at_line_start = True
        self._line_bare = False
        self._bare_parts: list[bytes] = []
        self._bare_joined = 0  # how many _bare_parts items are joins (wire._pieces)
        self._bare_size = 0  # bytes in _bare_parts: at most max_event_size
        self._bare_start: int | None = None
        self._bare_first: int | None = None
        self._bare_depth = 0
        self._bare_in_string = False
        self._bare_escape = False
        self._bare_ready: list[tuple[int, bytes]] = []

    def _scan_bare(self, data: bytes) -> None:
        """Find lines that are not SSE fields (Google's bare JSON error text).

        Lines split on LF (Gemini sends CRLF); a line is bare when its first byte is
        not that of an SSE field, comment or blank line. Bare lines are collected
        until their braces balance (strings and escapes respected), as google-genai
        does in ``_RawJsonLineBuffer``.
        """
        if self._deferred is not None:
            raise self._deferred.again()  # (the scan runs before the framer, which raises it too)
        if not data:
            return
        if not self._scan_started:
            # The stream's opening blank bytes (a BOM, which the framing's parser takes
            # as its own, whitespace) are skipped as they are when they come alone.
            content = data.lstrip(BLANK)
            self._scan_offset += len(data) - len(content)
            if not content:
                return
            self._scan_started = True
            data = content
        if (
            not self._bare_parts
            and (not self._at_line_start or data[0] in _SSE_LINE_STARTS)
            and _BARE_LINE.search(data) is None
        ):
            # Fast path (every ordinary chunk): no line in ``data`` starts bare.
            self._scan_offset += len(data)
            self._at_line_start = data[-1] == 10  # ended with LF
            self._line_bare = False
            return
        base = self._scan_offset
        self._scan_offset += len(data)
        pos = 0
        n = len(data)
        while pos < n:
            if self._at_line_start:
                self._at_line_start = False
                self._line_bare = data[pos] not in _SSE_LINE_STARTS
                if self._line_bare and self._bare_start is None:
                    self._bare_start = base + pos
                    if self._bare_first is None:
                        self._bare_first = base + pos
            nl = data.find(b"\n", pos)
            end = n if nl == -1 else nl + 1
            if self._line_bare:
                piece = data[pos:end]
                self._bare_size += len(piece)
                if self._bare_size > self._max_event:
                    # As for an SSE event: a bare text that never balances must not
                    # hold memory without bound. The stream stays failed (the decoder's
                    # deferred error is raised by every later feed and by close).
                    self._bare_parts = []
                    self._bare_joined = 0
                    self._deferred = BufferLimitExceeded(
                        f"bare text larger than max_event_size={self._max_event} bytes",
                        dialect=self.dialect,
                        byte_offset=self._bare_start,
                    )
                    raise self._deferred.again()
                parts = self._bare_parts
                parts.append(piece)
                if len(parts) - self._bare_joined >= PIECES:
                    self._bare_joined = join_recent(parts, self._bare_joined)
                self._count_braces(piece)
            if nl == -1:
                return
            pos = end
            self._at_line_start = True
            if self._line_bare and self._bare_depth == 0 and not self._bare_in_string:
                self._bare_done()

    def _bare_done(self) -> None:
        """A bare text is complete: queue it, unless it is only blanks (ignored)."""
        assert self._bare_start is not None
        text = b"".join(self._bare_parts)
        if text.strip():
            self._bare_ready.append((self._bare_start, text))
        elif self._bare_first == self._bare_start:
            self._bare_first = None
        self._bare_parts = []
        self._bare_joined = 0
        self._bare_size = 0
        self._bare_start = None
        self._bare_depth = 0
        self._bare_in_string = False
        self._bare_escape = False

    def _count_braces(self, piece: bytes) -> None:
        depth = self._bare_depth
        in_string = self._bare_in_string
        escape = self._bare_escape
        for c in piece:
            if in_string:
                if escape:
                    escape = False
                elif c == 92:  # backslash
                    escape = True
                elif c == 34:
                    in_string = False
            elif c == 34:
                in_string = True
            elif c in (123, 91):
                depth += 1
            elif c in (125, 93):
                depth -= 1
        self._bare_depth = depth
        self._bare_in_string = in_string
        self._bare_escape = escape

    def _drain_bare(
        self, out: list[Event], before: int | None, next_index: int | None = None
    ) -> None:
        """Handle the complete bare texts that began before offset ``before`` (all if
        None). Their event index is that of the event after them, ``next_index``
        (None: after every event dispatched so far), whatever the chunking."""
        index, offset = self.frame_index, self.frame_offset
        if next_index is None:
            next_index = self._sse.events_dispatched if self._sse is not None else 0
        while self._bare_ready and (before is None or self._bare_ready[0][0] < before):
            start, text = self._bare_ready.pop(0)
            self.frame_offset = start
            self.frame_index = next_index
            try:
                deep = too_deep(text, self._max_depth)
                if deep is not None:
                    raise BufferLimitExceeded(
                        f"bare JSON text nests deeper than max_depth={self._max_depth} "
                        f"(at byte {deep} of it)"
                    )
                self._chunk(text, out, bare=True)
            except RemoteProtocolError as exc:
                self._tolerate(exc, out)
        self.frame_index, self.frame_offset = index, offset
