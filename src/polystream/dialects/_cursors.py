"""The resume cursor of each SSE event an encoder writes, read back from its bytes.

:class:`CursorSplitter` splits a dialect encoder's output into SSE events and gives each
the cursor a resuming client names it by. It is what
:meth:`~polystream.dialects._base.DialectEncoder.encode_entries` runs over an encoder's
output unless the encoder reports its events' cursors itself (and the reference those
encoders are checked against): the gateway journals each event under its cursor.

* ``openai_responses`` / ``xai_responses``: the event's ``sequence_number``; the
  native id is ``response.id`` from the first event that carries it.
* ``gemini_interactions``: the event's ``event_id``; the native id is the
  interaction id.
* every other SSE dialect: a counter, written into the event as an SSE ``id:`` line
  ``<stream_id>.<n>`` so that a reconnecting client sends it back as
  ``Last-Event-ID`` (not into Gemini's generate streams, whose SDK rejects the line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

from polystream.dialects._base import DialectEncoder
from polystream.events import Event

__all__ = [
    "CursorSplitter",
    "EventCursors",
    "Mark",
    "MarkingEncoder",
    "cursor_mode",
    "event_blocks",
    "native_of",
    "read_cursors",
]

CursorMode = Literal["counter", "seq", "event_id"]

Mark = tuple[str | None, bytes, str | None]
"""One SSE event an encoder wrote, as it marks it while writing (for
:meth:`CursorSplitter.marked`): its cursor (``""``: the event carries none; None: read
it from the event), its bytes, and the stream's native id when the event carries it
(None: it carries none)."""

_NATIVE_CURSORS: Final[dict[str, CursorMode]] = {
    "openai_responses": "seq",
    "xai_responses": "seq",
    "gemini_interactions": "event_id",
}
"""The dialects whose events carry their own cursor (every other SSE dialect's is the
counter)."""


def cursor_mode(dialect: str) -> CursorMode:
    """Where ``dialect``'s cursors come from: the event's ``sequence_number`` (``seq``),
    its ``event_id``, or the ``counter``."""
    return _NATIVE_CURSORS.get(dialect, "counter")


class EventCursors(msgspec.Struct):
    """What the cursor of an event carrying one is read from (the rest of the event is
    skipped, not built): its number or id, and the object that names the stream."""

    sequence_number: Any = None
    event_id: Any = None
    response: msgspec.Raw = msgspec.Raw(b"")
    interaction: msgspec.Raw = msgspec.Raw(b"")


class _Named(msgspec.Struct):
    id: Any = None


_CURSORS: Final = msgspec.json.Decoder(EventCursors)
_NAMED: Final = msgspec.json.Decoder(_Named)
_NO_CURSORS: Final = EventCursors()
# An SSE event ends at a blank line; encoders write LF, Gemini's CRLF (as its wire does).
_EVENT_END: Final = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def event_blocks(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The SSE events ``buffer`` completes (each up to and with its blank line), and
    what follows the last of them (an event cut short). An event ends at the first
    blank line, whatever the line ends (LF, CRLF, CR); the usual case, LF only, is
    read with byte searches."""
    blocks: list[bytes] = []
    start = 0
    if 13 in buffer:  # a CR: any line ends
        for match in _EVENT_END.finditer(buffer):
            end = match.end()
            blocks.append(buffer[start:end])
            start = end
    else:
        find = buffer.find
        end = find(b"\n\n")
        while end >= 0:
            end += 2
            blocks.append(buffer[start:end])
            start = end
            end = find(b"\n\n", start)
    return blocks, buffer[start:]


def native_of(named: Any) -> str | None:
    """The native id a ``response`` or ``interaction`` object an encoder writes carries
    (the string ``id`` of a dict), as :meth:`CursorSplitter.split` reads it back."""
    if type(named) is dict:
        native = named.get("id")
        if type(native) is str:
            return native
    return None


def named_id(named: msgspec.Raw) -> str | None:
    """The string ``id`` of a JSON object (a ``response`` or ``interaction``), else None."""
    if not named:
        return None
    try:
        native = _NAMED.decode(named).id
    except msgspec.DecodeError:
        return None
    return native if type(native) is str else None


class CursorSplitter:
    """Split a dialect encoder's output into SSE events and give each its resume cursor
    (see the module's rules).

    An event ends at the first blank line, whatever the line ends (LF, CRLF, CR); an
    event cut short is kept for the next :meth:`split`. This runs on every event a
    gateway streams unless its encoder reports the cursors itself, so the usual case
    (LF line ends, one ``data:`` line) is read with byte searches and the ``id:`` line
    written by one formatting operation.
    """

    def __init__(self, dialect: str, stream_id: str) -> None:
        self.dialect = dialect
        self.stream_id = stream_id
        self.native_id: str | None = None  # the id the client resumes with
        self._count = 0
        self._tail = b""
        self._mode = cursor_mode(dialect)
        # google-genai's SSE reader takes every line for data and rejects an `id:` line,
        # so Gemini streams keep their bytes (and have no resume).
        self._id_lines = self._mode == "counter" and dialect != "gemini_generate"
        self._id_prefix = b"id: " + stream_id.encode() + b"."

    def split(self, data: bytes) -> list[tuple[str, bytes]]:
        """Entries ``(cursor, bytes)`` completed by ``data`` (bytes may be rewritten to
        carry an ``id:`` line)."""
        if not data:
            return []
        blocks, self._tail = event_blocks(self._tail + data if self._tail else data)
        if self._mode == "counter":
            return self._counted(blocks)
        return [self._entry(block) for block in blocks]

    def marked(self, data: bytes, marks: list[Mark]) -> list[tuple[str, bytes]]:
        """Entries for ``data``, an encoder's output whose events the encoder marked as
        it wrote them (see :data:`Mark`), in order: each event's cursor as marked, none
        read back from its JSON. Output the marks do not account for exactly (an event
        no mark was made for) is split and read as :meth:`split` does."""
        if self._tail or b"".join([m[1] for m in marks]) != data:
            return self.split(data)
        if self._mode == "counter":
            return self._counted([block for _, block, _ in marks])
        count = self._count
        out: list[tuple[str, bytes]] = []
        for cursor, block, native in marks:
            count += 1
            if cursor is None:
                self._count = count - 1
                out.append(self._entry(block))  # (counts it)
                continue
            if native is not None and self.native_id is None:
                self.native_id = native
            out.append((cursor or f"x{count}", block))
        self._count = count
        return out

    def _counted(self, blocks: list[bytes]) -> list[tuple[str, bytes]]:
        """Counter cursors for ``blocks`` (and an ``id:`` line in each but comments)."""
        count = self._count
        self._count = count + len(blocks)
        stream_id = self.stream_id
        if not self._id_lines:
            return [(f"{stream_id}.{n}", block) for n, block in enumerate(blocks, count + 1)]
        prefix = self._id_prefix
        out: list[tuple[str, bytes]] = []
        for n, block in enumerate(blocks, count + 1):
            if block[:1] == b":":
                out.append((f"{stream_id}.{n}", block))
                continue
            line_end = b"\r\n" if block.endswith(b"\r\n") else b"\r" if block[-1] == 13 else b"\n"
            out.append((f"{stream_id}.{n}", b"%s%d%s%s" % (prefix, n, line_end, block)))
        return out

    def _entry(self, block: bytes) -> tuple[str, bytes]:
        """The event's own cursor (``sequence_number`` or ``event_id``), else ``x<n>``."""
        self._count += 1
        found = read_cursors(block)
        if self.native_id is None:
            self.native_id = named_id(found.response if self._mode == "seq" else found.interaction)
        if self._mode == "seq":
            seq = found.sequence_number
            return (str(seq) if type(seq) is int else f"x{self._count}", block)
        event_id = found.event_id
        return (event_id if type(event_id) is str else f"x{self._count}", block)


def read_cursors(block: bytes) -> EventCursors:
    """The cursor fields of an SSE event's data, or none when it is no JSON object."""
    # The usual event, LF line ends and one data line, is read by byte searches.
    first = block[:5] == b"data:"
    at = 0 if first else block.find(b"\ndata:") + 1  # where the data line begins
    eol = block.find(b"\n", at) if first or at else -1
    if eol > 0 and 13 not in block and block.find(b"\ndata:", eol) < 0:
        payload = block[at + 5 : eol].lstrip(b" ")
    else:
        # Any line ends; the data lines joined by a line break, as a client reads them.
        payload = b"\n".join(
            line[5:].lstrip(b" ") for line in block.splitlines() if line.startswith(b"data:")
        )
    if not payload or payload == b"[DONE]":
        return _NO_CURSORS
    try:
        return _CURSORS.decode(payload)
    except msgspec.DecodeError:
        return _NO_CURSORS


class MarkingEncoder(DialectEncoder):
    """An encoder that marks each SSE event with its cursor where it writes it (the
    dialects whose events carry their own cursor), so that :meth:`encode_entries` reads
    none back from the bytes.

    While :meth:`encode_entries` runs, :attr:`_marks` is a list, and every place that
    writes an event appends its :data:`Mark` (:meth:`_mark_read` for bytes whose events
    the encoder does not know the cursors of); otherwise it is None and nothing is
    marked. Bytes the marks do not account for exactly are read as the splitter reads
    them, so that the entries are always the splitter's.
    """

    _marks: list[Mark] | None = None

    def encode_entries(
        self, events: Iterable[Event], *, close: bool = False
    ) -> list[tuple[str, bytes]]:
        """See :meth:`DialectEncoder.encode_entries` (the same entries)."""
        splitter: CursorSplitter | None = self._cursor_splitter
        if splitter is None:
            splitter = self._cursor_splitter = CursorSplitter(self.dialect, self.stream_id)
        marks: list[Mark] = []
        self._marks = marks
        encode = self.encode
        try:
            parts = [encode(event) for event in events]
            if close:
                parts.append(self.close())
        finally:
            self._marks = None
        entries = splitter.marked(b"".join(parts), marks)
        if self.native_id is None:
            self.native_id = splitter.native_id
        return entries

    def _mark_read(self, data: bytes, *, one: bool = False) -> None:
        """Mark the events of ``data`` as ones whose cursors are read from their bytes
        (``one``: it is one whole event, as :meth:`~polystream.wire.sse.SSEEncoder.event`
        writes; otherwise an event it leaves unfinished is left unmarked, and the call's
        output is then read as a whole)."""
        marks = self._marks
        if marks is not None and data:
            if one:
                marks.append((None, data, None))
                return
            for block in event_blocks(data)[0]:
                marks.append((None, block, None))
