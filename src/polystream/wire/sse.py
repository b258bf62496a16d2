"""Server-sent events: a sans-I/O decoder and encoder that follow the WHATWG
EventSource rules (HTML Living Standard, "9.2.6 Interpreting an event stream").

The decoder takes bytes in any chunking and returns complete frames::

    decoder = SSEDecoder()
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            ...            # ServerSentEvent or SSEComment
    decoder.close()        # raises StreamTruncated if the input stopped mid-event

Deliberate choices (each noted where it happens):

* Comment lines are *surfaced* as :class:`SSEComment` frames instead of being
  ignored, so keep-alives (``: ping``, ``: OPENROUTER PROCESSING``) are visible.
  They never start or end an event.
* An event with no ``event`` field reports ``event=None`` (the spec's default type
  is ``"message"``); an empty ``event:`` value also reports ``None``.
* ``close()`` with an event still open (a field line seen, no blank line yet, or an
  unterminated line) raises :class:`~polystream.errors.StreamTruncated` instead of
  silently discarding it as a browser would: a stream that stops mid-event is not
  complete. A trailing unterminated *comment* line is returned as a comment.
* Lines are split on bytes (CR, LF and CRLF are ASCII and never occur inside a
  multi-byte UTF-8 sequence), then each value is decoded with invalid sequences
  replaced by U+FFFD. A character split across chunks therefore decodes whole.
* When a chunk completes some frames and then exceeds a limit, ``feed`` returns those
  frames and the error is raised by the next ``feed`` or ``close``: the frames before
  an error are the same whatever the chunking, and none is lost.
* A ``retry`` value too long for Python's integer parsing (over 4300 digits) is
  ignored, like any other unusable ``retry`` value.
"""

from __future__ import annotations

import contextlib
from typing import Final, TypeAlias

import msgspec

from polystream.errors import BufferLimitExceeded, LocalProtocolError, StreamTruncated
from polystream.wire._pieces import PIECES, join_recent

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_LINE_SIZE",
    "SSEComment",
    "SSEDecoder",
    "SSEEncoder",
    "SSEFrame",
    "ServerSentEvent",
]

DEFAULT_MAX_LINE_SIZE: Final = 32 * 1024 * 1024
"""Longest line accepted (32 MiB). One ``data:`` line can carry a whole base64 image
(OpenAI partial images, Gemini ``inlineData``), a few MiB in practice; 32 MiB leaves
room while keeping a runaway line without a newline from exhausting memory."""

DEFAULT_MAX_EVENT_SIZE: Final = 64 * 1024 * 1024
"""Largest ``data`` payload of one event, in bytes: all its ``data:`` lines together,
with the LFs that join them (64 MiB, twice the line limit: an event may split a large
payload over several lines)."""

_BOM: Final = b"\xef\xbb\xbf"
_NAMES_CACHED: Final = 64  # ``event:`` lines whose event type a decoder keeps decoded
_NAME_CACHED_SIZE: Final = 256  # longest ``event:`` line kept there, in bytes


class ServerSentEvent(msgspec.Struct, frozen=True, gc=False):
    """One dispatched event.

    Fields:
        data: The data lines joined with LF (the spec's data buffer, final LF removed).
        event: The ``event`` field, or None when the block named none.
        id: The last event ID at dispatch (it persists across events, per the spec).
        retry: The value of a valid ``retry`` field in this block, else None.
        offset: Byte offset in the input where this event's first line began.
        index: 0-based position of this event among the dispatched events.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    offset: int = 0
    index: int = 0


class SSEComment(msgspec.Struct, frozen=True, gc=False):
    """A comment line (``:`` first). Keep-alives arrive this way.

    Fields:
        text: The text after the colon, with one leading space removed.
        offset: Byte offset of the line.
    """

    text: str
    offset: int = 0


SSEFrame: TypeAlias = ServerSentEvent | SSEComment


class SSEDecoder:
    """Incremental WHATWG event-stream parser. Sans-I/O: bytes in, frames out.

    Args:
        max_line_size: Longest line accepted, in bytes; see :data:`DEFAULT_MAX_LINE_SIZE`.
        max_event_size: Largest data payload of one event; see
            :data:`DEFAULT_MAX_EVENT_SIZE`.
        fast: Take the lines of the common block shapes through the fast path
            (``_scan``). False applies every line through the line machine (``_line``
            and ``_dispatch``, the plain reading of the WHATWG rules), the reference the
            fast path is tested equal to: the same frames, properties and errors for any
            input in any chunking.

    After a :class:`~polystream.errors.BufferLimitExceeded`, the decoder is unusable
    and raises that error again (a copy: see :meth:`~polystream.errors.ProtocolError.again`);
    memory stays bounded by the limits.
    """

    __slots__ = (
        "_block_limit",
        "_bom_buffer",
        "_bom_done",
        "_closed",
        "_count",
        "_data",
        "_data_joined",
        "_data_size",
        "_event_start",
        "_event_type",
        "_failed",
        "_fast",
        "_last_id",
        "_max_event",
        "_max_line",
        "_names",
        "_offset",
        "_retry",
        "_skip_lf",
        "_tail",
        "_tail_joined",
        "_tail_size",
        "_tail_start",
    )

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        fast: bool = True,
    ) -> None:
        if max_line_size < 1 or max_event_size < 1:
            raise ValueError("limits must be positive")
        self._max_line = max_line_size
        self._max_event = max_event_size
        # A line (or a block up to its last LF) no longer than this is within both limits.
        self._block_limit = min(max_line_size, max_event_size)
        self._offset = 0  # absolute offset of the next byte to scan
        self._bom_done = False
        self._bom_buffer = b""
        self._skip_lf = False  # a CR ended the previous chunk: drop an LF that follows
        self._tail: list[bytes] = []  # pieces of an unterminated line
        self._tail_joined = 0  # how many _tail items are joins (wire._pieces)
        self._tail_size = 0
        self._tail_start = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._data_joined = 0  # how many _data items are joins of lines (wire._pieces)
        self._event_type: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._event_start: int | None = None
        self._count = 0
        self._closed = False
        self._failed: BufferLimitExceeded | None = None
        self._fast = fast
        self._names: dict[bytes, str | None] = {}  # ``event:`` line -> its event type

    @property
    def last_event_id(self) -> str | None:
        """The last event ID buffer (what a reconnect would send as ``Last-Event-ID``)."""
        return self._last_id

    @property
    def events_dispatched(self) -> int:
        """How many events have been dispatched so far."""
        return self._count

    @property
    def open_event_offset(self) -> int | None:
        """Byte offset where the event still open began (a field line seen, no blank
        line yet), or None when no event is open."""
        return self._event_start

    @property
    def bytes_consumed(self) -> int:
        """How many input bytes have been fed so far."""
        return self._offset + len(self._bom_buffer)

    @property
    def block_limit(self) -> int:
        """The longest block the fast paths take whole, in bytes: the smaller of the two
        limits (a block up to its last LF within it holds no line or data over either).
        A caller that takes blocks itself (see :meth:`skip`) checks the same bound."""
        return self._block_limit

    @property
    def idle(self) -> bool:
        """Whether the input so far ends at a block boundary with nothing pending: the
        BOM decided, no line or event open, no CR waiting for its LF, no error, not
        closed. Only then may a caller take blocks itself (see :meth:`skip`)."""
        return (
            self._bom_done
            and self._event_start is None
            and not self._tail
            and not self._skip_lf
            and self._failed is None
            and not self._closed
        )

    def takeover(self) -> tuple[int, int] | None:
        """For a caller that takes blocks itself (see :meth:`skip`), what it needs in one
        call: None unless :attr:`idle`, else the :attr:`events_dispatched` and
        :attr:`bytes_consumed` so far."""
        if self.idle:
            return self._count, self.bytes_consumed
        return None

    def skip(self, size: int, events: int) -> None:
        """Account for ``size`` bytes of input that the caller read itself, while
        :attr:`idle`, as ``events`` whole blocks of this decoder's fast path's simplest
        shape: each one ``data:`` line within both limits followed by a blank line
        (LF or CRLF line ends), no other field. Those events have the indexes and
        offsets this decoder would have given them; the last event ID does not change.
        A caller that recognises most blocks of its stream by their exact bytes saves
        building frames it would parse again.

        Raises:
            LocalProtocolError: The decoder is not idle.
        """
        if not self.idle:
            raise LocalProtocolError("skip() with input pending", dialect="sse")
        self._offset += size
        self._count += events

    def feed(self, data: bytes | bytearray | memoryview) -> list[SSEFrame]:
        """Consume a chunk of the stream and return every frame it completed.

        Args:
            data: Any number of bytes, split anywhere (any bytes-like object).

        Returns:
            Events and comments completed by this chunk, in order (possibly none).

        Raises:
            BufferLimitExceeded: A line or an event grew past its limit. If the same
                chunk completed frames before that, they are returned instead and the
                error is raised by the next call to ``feed`` or ``close``.
            LocalProtocolError: ``feed`` after ``close``.
        """
        out: list[SSEFrame] = []
        if (
            type(data) is bytes
            and self._fast
            and self._bom_done
            and self._event_start is None
            and not self._tail
            and not self._skip_lf
            and self._failed is None
            and not self._closed
        ):
            # ``idle`` (inlined: this runs on every feed, one event per network read in
            # the middle of a stream): the chunk starts a block, so the fast path takes
            # it from its first byte, without the set-up of ``_feed``.
            n = len(data)
            base = self._offset
            self._offset = base + n
            pos, crn, resume = self._scan(data, 0, base, -1 if 13 in data else n, out)
            if pos < n:
                try:
                    # The line where the fast path stopped goes to the line machine.
                    self._lines(data, pos, base, crn, max(resume, pos + 1), out)
                except BufferLimitExceeded:
                    if not out:
                        raise
            return out
        if self._closed:
            raise LocalProtocolError("feed() after close()", dialect="sse")
        if self._failed is not None:
            raise self._failed.again()
        if not data:
            return out
        if not isinstance(data, bytes):
            data = bytes(data)  # a bytearray or memoryview: the fast path hashes slices
        try:
            self._feed(data, out)
        except BufferLimitExceeded:
            # Frames completed before the limit was hit are delivered now (a chunking
            # that split the input just before the fault would deliver them too);
            # ``self._failed`` raises at the next call.
            if not out:
                raise
        return out

    def _feed(self, data: bytes, out: list[SSEFrame]) -> None:
        if not self._bom_done:
            # WHATWG: one U+FEFF at the very start of the stream is ignored; we may
            # need up to three bytes to decide.
            data = self._bom_buffer + data
            if len(data) < 3 and _BOM.startswith(data):
                self._bom_buffer = data
                return
            self._bom_buffer = b""
            self._bom_done = True
            if data.startswith(_BOM):
                data = data[3:]
                self._offset += 3
                if not data:
                    return
        base = self._offset
        self._offset += len(data)
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 10:  # CRLF split across chunks: the LF belongs to that CR
                start = 1
        # (13: CR; an int is searched with less set-up)
        self._lines(data, start, base, -1 if 13 in data else len(data), start, out)

    def _lines(
        self, data: bytes, start: int, base: int, crn: int, resume: int, out: list[SSEFrame]
    ) -> None:
        """The chunk ``data`` (input offset ``base``) from ``start`` on, line by line:
        through the fast path (``_scan``) where it may succeed, else the line machine
        (``_line``, ``_dispatch``), which applies every rule.

        ``lfn`` and ``crn`` cache the next LF and CR at or after ``start`` (``len(data)``
        when there is none; recomputed only once ``start`` has passed them), so that
        every byte is searched a bounded number of times however the lines end.
        ``resume`` is the first position where the fast path may succeed again.
        """
        n = len(data)
        lfn = -1
        fast = self._fast
        while start < n:
            if fast and start >= resume and self._event_start is None and not self._tail:
                start, crn, resume = self._scan(data, start, base, crn, out)
                if start >= n:
                    break
            if lfn < start:
                lfn = data.find(b"\n", start)
                if lfn == -1:
                    lfn = n
            if crn < start:
                crn = data.find(b"\r", start)
                if crn == -1:
                    crn = n
            if crn < lfn:
                end = crn
                if crn + 1 < n:
                    nxt = crn + 2 if data[crn + 1] == 10 else crn + 1
                else:
                    # A CR at the end of a chunk: the LF may come in the next one.
                    nxt = n
                    self._skip_lf = True
            elif lfn < n:
                end = lfn
                nxt = lfn + 1
            else:
                end = -1
                nxt = n
            if end == -1:
                # No line end in the rest of this chunk: keep it as the tail.
                piece = data[start:]
                if not self._tail:
                    self._tail_start = base + start
                self._tail_size += len(piece)
                if self._tail_size > self._max_line:
                    self._fail_line()
                tail = self._tail
                tail.append(piece)
                if len(tail) - self._tail_joined >= PIECES:
                    self._tail_joined = join_recent(tail, self._tail_joined)
                break
            if self._tail:
                self._tail.append(data[start:end])
                line = b"".join(self._tail)
                line_start = self._tail_start
                self._tail = []
                self._tail_joined = 0
                self._tail_size = 0
                if len(line) > self._max_line:
                    self._fail_line()
            else:
                line = data[start:end]
                line_start = base + start
                if end - start > self._max_line:
                    self._tail_start = line_start
                    self._fail_line()
            self._line(line, line_start, out)
            start = nxt

    def close(self) -> list[SSEFrame]:
        """Signal the end of input. Safe to call twice.

        Returns:
            A trailing unterminated comment line, if there was one.

        Raises:
            StreamTruncated: The input ended inside an event (a field line without the
                blank line that dispatches it, or an unterminated field line).
            BufferLimitExceeded: A limit was exceeded before (raised again, once).
        """
        if self._closed:
            return []
        self._closed = True
        if self._failed is not None:
            # The input was not decoded to its end: never report a clean close.
            raise self._failed.again()
        out: list[SSEFrame] = []
        if self._bom_buffer:
            raise StreamTruncated(
                "stream ended inside a partial first line", dialect="sse", byte_offset=0
            )
        if self._tail:
            line = b"".join(self._tail)
            if line[:1] == b":" and self._event_start is None:
                self._line(line, self._tail_start, out)
                self._tail = []
                self._tail_joined = 0
                return out
            start = self._event_start if self._event_start is not None else self._tail_start
            raise StreamTruncated(
                "stream ended inside an unterminated line",
                dialect="sse",
                event_index=self._count,
                byte_offset=start,
            )
        if self._event_start is not None:
            raise StreamTruncated(
                "stream ended inside an event that was never dispatched (no blank line)",
                dialect="sse",
                event_index=self._count,
                byte_offset=self._event_start,
            )
        return out

    # -- internals ---------------------------------------------------------------------

    def _fail_line(self) -> None:
        self._tail = []
        self._tail_joined = 0
        self._failed = BufferLimitExceeded(
            f"line longer than max_line_size={self._max_line} bytes",
            dialect="sse",
            event_index=self._count,
            byte_offset=self._tail_start,
        )
        raise self._failed.again()

    def _scan(
        self, data: bytes, pos: int, base: int, crn: int, out: list[SSEFrame]
    ) -> tuple[int, int, int]:
        """Fast path of the line machine, from a line start at ``pos`` where no event is
        open and no line is pending. Returns ``(pos, crn, resume)``.

        Runs of the two block shapes of nearly every stream, ``data: V`` alone (its line
        and the blank line ended by LF, or both by CRLF) and ``event: NAME`` then
        ``data: V`` (LF), are taken whole with one ``find`` per line (none for an event
        line that repeats the previous one). Other lines ended by LF or CRLF and whole in
        this chunk are applied one by one when they are ``data:`` (the first of an
        event), ``event:``, ``id:``, a comment or blank, with the same effect as
        ``_line`` and ``_dispatch``. At any other line (a second ``data:`` line,
        ``retry``, another field, a line without a colon, a lone CR, a line over a limit,
        a line cut by the end of the chunk) the open event is handed over to the line
        machine, which goes on from that line and applies every rule.

        ``crn`` is the next CR at or after ``pos`` (``len(data)`` when there is none;
        recomputed when stale); ``resume`` is where the caller may try again (past the
        bytes already searched in vain).

        At the start of a chunk (``pos`` 0), a chunk that is exactly one block of those
        shapes (``data: V``, LF or CRLF; ``event: NAME`` + ``data: V``, LF), within both
        limits, is taken first with a few slices and ``find``s, without the set-up of the
        loop: in the middle of a stream a network read mostly holds one event.
        """
        n = len(data)
        if pos == 0:
            value: bytes | None = None
            name: str | None = None
            if data[-2:] == b"\n\n":
                if crn == n:  # no CR in the chunk
                    lf = data.find(b"\n")
                    head = data[:6]
                    if head == b"data: ":
                        if lf == n - 2 and lf <= self._block_limit:
                            value = data[6:lf]
                    elif (
                        head == b"event:"
                        and data.find(b"\n", lf + 1) == n - 2
                        and data[lf + 1 : lf + 7] == b"data: "
                        and n - 2 <= self._block_limit
                    ):
                        line = data[:lf]
                        name = self._names.get(line, "")  # "" is never cached (reads None)
                        if name == "":
                            name = self._event_name(line)
                        value = data[lf + 7 : n - 2]
            elif data[-4:] == b"\r\n\r\n" and data[:6] == b"data: ":
                cr = n - 4
                if (
                    data.find(b"\r") == cr
                    and data.find(b"\n") == cr + 1
                    and cr <= self._block_limit
                ):
                    value = data[6:cr]
            if value is not None:
                out.append(
                    ServerSentEvent(
                        value.decode("utf-8", "replace"),
                        name,
                        self._last_id,
                        None,
                        base,
                        self._count,
                    )
                )
                self._count += 1
                return n, n, n
        find = data.find
        startswith = data.startswith
        append = out.append
        names = self._names
        max_line = self._max_line
        max_event = self._max_event
        limit = self._block_limit  # a shorter line is within both limits
        last_id = self._last_id
        count = self._count
        resume = pos
        event_start = -1  # absolute offset of the open event's first field line
        event_type: str | None = None
        value = None  # the open event's one data value
        while pos < n:
            if event_start == -1:
                # Runs of the two shapes of almost every block, taken whole: ``data: V``
                # (LF or CRLF line ends) and ``event: NAME`` + ``data: V`` (LF), each
                # followed by its blank line, and after one ``id:`` line (LF) as a
                # resumable stream sends them. A block of another shape goes on to the
                # line-by-line code below. ``block`` is where the block began.
                block = pos
                head = data[pos : pos + 6]
                if head[:3] == b"id:":
                    lf = find(b"\n", pos)
                    if crn < pos:
                        crn = find(b"\r", pos)
                        if crn == -1:
                            crn = n
                    if pos < lf < crn and lf - pos <= max_line:
                        start = pos + 3
                        if data[start] == 32:
                            start += 1
                        ident = data[start:lf]
                        if b"\x00" not in ident:  # WHATWG: an id with NULL is ignored
                            last_id = ident.decode("utf-8", "replace")
                        pos = lf + 1
                        head = data[pos : pos + 6]
                if head == b"data: ":
                    if crn < pos:
                        crn = find(b"\r", pos)
                        if crn == -1:
                            crn = n
                    lf = find(b"\n", pos)
                    # No CR in the line nor in the blank line after it (``crn - 1``
                    # also keeps ``lf + 1`` inside the chunk).
                    while pos < lf < crn - 1 and data[lf + 1] == 10 and lf - pos <= limit:
                        append(
                            ServerSentEvent(
                                data[pos + 6 : lf].decode("utf-8", "replace"),
                                None,
                                last_id,
                                None,  # no ``retry`` field goes through this path
                                base + block,
                                count,
                            )
                        )
                        count += 1
                        pos = lf + 2
                        block = pos
                        if data[pos : pos + 6] != b"data: ":
                            break
                        lf = find(b"\n", pos)
                    else:
                        # The line and the blank line after it both ended by CRLF.
                        while crn + 1 == lf and startswith(b"\r\n", lf + 1) and crn - pos <= limit:
                            append(
                                ServerSentEvent(
                                    data[pos + 6 : crn].decode("utf-8", "replace"),
                                    None,
                                    last_id,
                                    None,
                                    base + block,
                                    count,
                                )
                            )
                            count += 1
                            pos = lf + 3
                            block = pos
                            crn = find(b"\r", pos)
                            if crn == -1:
                                crn = n
                            if data[pos : pos + 6] != b"data: ":
                                break
                            lf = find(b"\n", pos)
                        else:
                            head = b""  # this block: line by line
                elif head == b"event:":
                    if crn < pos:
                        crn = find(b"\r", pos)
                        if crn == -1:
                            crn = n
                    # ``known`` is the event line of the previous block of the run, with
                    # its LF: a block that repeats it needs no search for that line.
                    known = b"\n"  # (no match at the run's first block: "event:")
                    size = 0
                    name = None
                    while True:
                        if startswith(known, pos):
                            lf = pos + size
                        elif startswith(b"event:", pos):
                            lf = find(b"\n", pos)
                            if lf == -1:
                                head = b""
                                break
                            line = data[pos:lf]
                            name = names.get(line, "")  # "" is never cached (reads None)
                            if name == "":
                                name = self._event_name(line)
                            known = line + b"\n"
                            size = lf - pos
                        else:
                            break  # another shape: dispatch on it again
                        end = find(b"\n", lf + 1)
                        # No CR up to the blank line, included (``crn - 1`` also keeps
                        # ``end + 1`` inside the chunk).
                        if not (
                            lf < end < crn - 1
                            and data[end + 1] == 10
                            and end - pos <= limit
                            and startswith(b"data: ", lf + 1)
                        ):
                            head = b""  # this block: line by line
                            break
                        append(
                            ServerSentEvent(
                                data[lf + 7 : end].decode("utf-8", "replace"),
                                name,
                                last_id,
                                None,
                                base + block,
                                count,
                            )
                        )
                        count += 1
                        pos = end + 2
                        block = pos
                else:
                    head = b""
                if head:
                    continue
                if block != pos:
                    event_start = base + block  # an ``id:`` line was taken: the event is open
            lf = find(b"\n", pos)
            if lf == -1:
                resume = n  # the rest of the chunk has no LF: the line machine's
                break
            if crn < pos:
                crn = find(b"\r", pos)
                if crn == -1:
                    crn = n
            if lf < crn:
                end = lf
            elif crn + 1 == lf:
                end = crn  # CRLF
            else:
                resume = lf  # a lone CR ends a line before this LF
                break
            if end == pos:
                # A blank line: dispatch (WHATWG), exactly as ``_dispatch``.
                if value is not None:
                    append(
                        ServerSentEvent(
                            value.decode("utf-8", "replace"),
                            event_type,
                            last_id,
                            None,  # no ``retry`` field goes through this path
                            event_start,
                            count,
                        )
                    )
                    count += 1
                    value = None
                event_type = None
                event_start = -1
                pos = lf + 1
                continue
            if end - pos > max_line:
                break  # the line machine raises BufferLimitExceeded
            first = data[pos]
            if first == 100 and startswith(b"data:", pos):  # "d"
                if value is not None:
                    break  # several data lines: the line machine joins them
                start = pos + 5
                if data[start] == 32:  # one leading space dropped (never past ``end``)
                    start += 1
                if end - start > max_event:
                    break  # the line machine raises BufferLimitExceeded
                value = data[start:end]
            elif first == 101:  # "e"
                line = data[pos:end]
                name = names.get(line, "")  # "" is never cached (it reads None)
                if name == "":
                    if line[:6] != b"event:":
                        break
                    name = self._event_name(line)
                event_type = name
            elif first == 58:  # ":" -> comment
                start = pos + 1
                if data[start] == 32:
                    start += 1
                append(SSEComment(data[start:end].decode("utf-8", "replace"), base + pos))
                pos = lf + 1
                continue  # a comment neither starts nor ends an event
            elif first == 105 and startswith(b"id:", pos):  # "i"
                start = pos + 3
                if data[start] == 32:
                    start += 1
                ident = data[start:end]
                if b"\x00" not in ident:  # WHATWG: an id containing NULL is ignored
                    last_id = ident.decode("utf-8", "replace")
            else:
                break
            if event_start == -1:
                event_start = base + pos
            pos = lf + 1
        self._count = count
        self._last_id = last_id
        if event_start != -1:
            self._event_start = event_start
            self._event_type = event_type
            if value is not None:
                self._data = [value]
                self._data_size = len(value)
                self._data_joined = 0
        return pos, crn, resume

    def _event_name(self, line: bytes) -> str | None:
        """The event type of an ``event:`` line (WHATWG: an empty value reads None),
        kept for the next blocks that repeat the line."""
        value = line[6:]
        if value[:1] == b" ":
            value = value[1:]
        name = value.decode("utf-8", "replace") or None
        if len(self._names) < _NAMES_CACHED and len(line) <= _NAME_CACHED_SIZE:
            self._names[line] = name
        return name

    def _line(self, line: bytes, line_start: int, out: list[SSEFrame]) -> None:
        if not line:
            # WHATWG: a blank line dispatches the event.
            self._dispatch(out)
            return
        if line[0] == 58:  # ":" -> comment
            text = line[1:]
            if text[:1] == b" ":
                text = text[1:]
            out.append(SSEComment(text.decode("utf-8", "replace"), line_start))
            return
        if self._event_start is None:
            self._event_start = line_start
        colon = line.find(b":")
        if colon == -1:
            # WHATWG: a line without a colon is a field name with an empty value.
            name = line
            value = b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            # The event's data is the lines joined with LF: count exactly that.
            self._data_size += len(value) + 1 if self._data else len(value)
            if self._data_size > self._max_event:
                self._failed = BufferLimitExceeded(
                    f"event data larger than max_event_size={self._max_event} bytes",
                    dialect="sse",
                    event_index=self._count,
                    byte_offset=self._event_start,
                )
                self._data = []
                self._data_joined = 0
                raise self._failed.again()
            data = self._data
            data.append(value)
            if len(data) - self._data_joined >= PIECES:
                self._data_joined = join_recent(data, self._data_joined, b"\n")
        elif name == b"event":
            self._event_type = value.decode("utf-8", "replace") or None
        elif name == b"id" and b"\x00" not in value:
            # WHATWG: an id containing U+0000 NULL is ignored.
            self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            # WHATWG: only ASCII digits set the reconnection time (bytes.isdigit is ASCII-only).
            # More digits than int() accepts (sys.get_int_max_str_digits) is unusable,
            # so it is ignored like any invalid value instead of failing the stream.
            with contextlib.suppress(ValueError):
                self._retry = int(value)
        # Any other field name is ignored (WHATWG).

    def _dispatch(self, out: list[SSEFrame]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(
                ServerSentEvent(
                    data.decode("utf-8", "replace"),
                    self._event_type,
                    self._last_id,
                    self._retry,
                    self._event_start if self._event_start is not None else 0,
                    self._count,
                )
            )
            self._count += 1
            self._data = []
            self._data_size = 0
            self._data_joined = 0
        # WHATWG: with an empty data buffer nothing is dispatched, but the event type
        # buffer is reset all the same.
        self._event_type = None
        self._retry = None
        self._event_start = None


class SSEEncoder:
    """Writes server-sent events, the exact inverse of :class:`SSEDecoder`.

    Lines end with LF. Multi-line data becomes several ``data:`` lines. A CR or LF in
    ``event`` or ``id`` (or NUL in ``id``) cannot be represented and raises
    :class:`~polystream.errors.LocalProtocolError` (tolerance belongs to decoders).
    """

    __slots__ = ()

    def event(
        self,
        data: str,
        *,
        event: str | None = None,
        id: str | None = None,
        retry: int | None = None,
    ) -> bytes:
        """Encode one event.

        Args:
            data: The payload; any CR, LF or CRLF in it starts a new ``data:`` line.
            event: The event name, or None for no ``event:`` line.
            id: The event id, or None for no ``id:`` line.
            retry: A reconnection time in milliseconds, or None.

        Returns:
            The event's bytes, ending with the blank line that dispatches it.

        Raises:
            LocalProtocolError: ``event`` holds CR or LF, ``id`` holds CR, LF or NUL,
                ``retry`` is negative, or the text holds a lone surrogate.
        """
        head = ""
        if event is not None:
            if "\n" in event or "\r" in event:
                raise LocalProtocolError("SSE event name contains CR or LF", dialect="sse")
            head = f"event: {event}\n"
        if id is not None:
            if "\n" in id or "\r" in id or "\x00" in id:
                raise LocalProtocolError("SSE id contains CR, LF or NUL", dialect="sse")
            head += f"id: {id}\n"
        if retry is not None:
            if retry < 0:
                raise LocalProtocolError("SSE retry must be >= 0", dialect="sse")
            head += f"retry: {retry}\n"
        if "\n" in data or "\r" in data:
            lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            body = "".join(f"data: {line}\n" for line in lines)
        else:
            body = f"data: {data}\n"
        return _utf8(head + body + "\n")

    def comment(self, text: str = "") -> bytes:
        """Encode a comment line (a keep-alive). Multi-line text becomes several lines."""
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return _utf8("".join(f": {line}\n" if line else ":\n" for line in lines))


def _utf8(text: str) -> bytes:
    """Encode for the wire; text that UTF-8 cannot carry (a lone surrogate) is the
    caller's error, reported as such."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"SSE text is not valid Unicode: {exc}", dialect="sse") from None
