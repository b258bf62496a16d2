"""The SSE decoder against the WHATWG EventSource parsing rules (HTML Living Standard,
§9.2.6 "Interpreting an event stream"), as a table of cases: input bytes -> the frames
expected, then what ``close()`` reports.

Cases named ``wpt-*`` transcribe web-platform-tests ``eventsource/format-*.htm``; the
others are written from the spec's text, quoted beside them. Every case is run with the
input whole, one byte at a time and split at random offsets (``assert_chunking_invariant``),
so a CR at the end of one chunk with its LF at the start of the next, a BOM or a UTF-8
sequence split across chunks are all exercised.

Frames are compared as tuples: ``("event", data, event, id, retry)`` and
``("comment", text)``; a truncated close adds ``("truncated", byte_offset, event_index)``.
Offsets and indices of dispatched events are checked in test_sse_decoder.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from polystream.errors import StreamTruncated
from polystream.wire.sse import ServerSentEvent, SSEComment, SSEDecoder
from tests.helpers import assert_chunking_invariant

BOM = b"\xef\xbb\xbf"


def E(data: str, event: str | None = None, id: str | None = None, retry: int | None = None):
    return ("event", data, event, id, retry)


def C(text: str):
    return ("comment", text)


def T(offset: int, index: int | None):
    return ("truncated", offset, index)


class Normalised:
    """An SSEDecoder whose frames are tuples and whose truncation is a final frame."""

    def __init__(self) -> None:
        self.decoder = SSEDecoder()

    @staticmethod
    def _frames(frames: list[Any]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for frame in frames:
            if isinstance(frame, SSEComment):
                out.append(C(frame.text))
            else:
                assert isinstance(frame, ServerSentEvent)
                out.append(E(frame.data, frame.event, frame.id, frame.retry))
        return out

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        return self._frames(self.decoder.feed(data))

    def close(self) -> list[tuple[Any, ...]]:
        try:
            return self._frames(self.decoder.close())
        except StreamTruncated as exc:
            assert exc.byte_offset is not None
            return [T(exc.byte_offset, exc.event_index)]


LONG = "x" * 2048

CASES: list[tuple[str, bytes, list[tuple[Any, ...]]]] = [
    # -- line ends: "Lines must be separated by either a U+000D CARRIAGE RETURN U+000A
    #    LINE FEED (CRLF) character pair, a single U+000A LINE FEED (LF) character, or a
    #    single U+000D CARRIAGE RETURN (CR) character."
    ("lf", b"data: a\n\n", [E("a")]),
    ("cr", b"data: a\r\r", [E("a")]),
    ("crlf", b"data: a\r\n\r\n", [E("a")]),
    ("mixed line ends in one event", b"data: a\rdata: b\ndata: c\r\n\n", [E("a\nb\nc")]),
    # LF then CR is two line ends (the second ends an empty line: dispatch), not one.
    ("lf cr is two line ends", b"data: a\n\rdata: b\n\n", [E("a"), E("b")]),
    ("cr cr", b"data: a\r\rdata: b\r\r", [E("a"), E("b")]),
    ("crlf crlf crlf", b"data: a\r\n\r\n\r\n", [E("a")]),
    ("a CR ending the input ends the line", b"data: a\n\r", [E("a")]),
    # Only CR, LF and CRLF end lines: not U+2028, U+0085, VT or FF (str.splitlines would).
    (
        "unicode line separators are data",
        "data: a\u2028b\x85c\x0bd\x0ce\x1cf\n\n".encode(),
        [E("a\u2028b\x85c\x0bd\x0ce\x1cf")],
    ),
    # -- BOM: "The UTF-8 decode algorithm strips one leading UTF-8 Byte Order Mark (BOM),
    #    if any." Only one, and only at the very start.
    ("bom at start", BOM + b"data: a\n\n", [E("a")]),
    (
        "wpt-format-bom: a later BOM is part of a field name",
        BOM + b"data:1\n\n" + BOM + b"data:2\n\ndata:3\n\n",
        [E("1"), E("3")],
    ),
    (
        "wpt-format-bom-2: a second BOM at the start is data",
        BOM + BOM + b"data:1\n\ndata:2\n\ndata:3\n\n",
        [E("2"), E("3")],
    ),
    ("bom inside a value is data", b"data: " + BOM + b"x\n\n", [E("\ufeffx")]),
    ("bom alone", BOM, []),
    # -- comments: "If the line starts with a U+003A COLON character (:) Ignore the
    #    line." We surface them as comments (keep-alives) and they never touch the event.
    (
        "wpt-format-comments",
        b"data:1\r:\x00\n:\r\ndata:2\n:"
        + LONG.encode()
        + b"\rdata:3\n:data:fail\r:"
        + LONG.encode()
        + b"\ndata:4\n\n",
        [C("\x00"), C(""), C(LONG), C("data:fail"), C(LONG), E("1\n2\n3\n4")],
    ),
    ("keep-alive ping", b": ping\n\n", [C("ping")]),
    (
        "openrouter processing comments are not JSON",
        b': OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\ndata: {"a":1}\n\n',
        [C("OPENROUTER PROCESSING"), C("OPENROUTER PROCESSING"), E('{"a":1}')],
    ),
    ("comment without space", b":ping\n", [C("ping")]),
    ("comment keeps a second space", b":  two\n", [C(" two")]),
    ("empty comment", b":\n", [C("")]),
    ("comment inside an event", b"data: a\n: c\ndata: b\n\n", [C("c"), E("a\nb")]),
    # -- data: "Append the field value to the data buffer, then append a single U+000A
    #    LINE FEED (LF) character"; at dispatch "If the data buffer's last character is a
    #    U+000A LINE FEED (LF) character, then remove the last character".
    ("wpt-format-field-data", b"data:\n\ndata\ndata\n\ndata:test\n\n", [E(""), E("\n"), E("test")]),
    ("data lines joined with lf", b"data: a\ndata:\ndata: b\n\n", [E("a\n\nb")]),
    ("trailing empty data line", b"data: a\ndata\n\n", [E("a\n")]),
    ("colon in the value", b"data: a: b\ndata::\n\n", [E("a: b\n:")]),
    # "If value starts with a U+0020 SPACE character, remove it from value."  One only.
    ("wpt-format-leading-space", b"data:  test\n\n", [E(" test")]),
    ("no space after the colon", b"data:test\n\n", [E("test")]),
    ("a tab is not removed", b"data:\ttest\n\n", [E("\ttest")]),
    ("wpt-format-newlines", b"data:test\r\ndata\ndata:test\r\n\r\n", [E("test\n\ntest")]),
    ("wpt-format-null-character", b"data:\x00\n\n\n\n", [E("\x00")]),
    ("wpt-format-utf-8", "data:ok\u2026\n\n".encode(), [E("ok\u2026")]),
    # -- field names: "If the line contains a U+003A COLON character (:) Collect the
    #    characters on the line before the first U+003A COLON character (:) ... Otherwise,
    #    the string is not empty but does not contain a U+003A COLON character (:) ...
    #    using the whole line as the field name, and the empty string as the field value."
    (
        "wpt-format-field-parsing",
        b"data:\x00\ndata:  2\rData:1\ndata\x00:2\ndata:1\r\x00data:4\nda-ta:3\rdata_5\n"
        b"data:3\rdata:\r\n data:32\ndata:4\n\n",
        [E("\x00\n 2\n1\n3\n\n4")],
    ),
    (
        "wpt-format-field-unknown",
        b"data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n",
        [C("thisisacommentyay"), E("test\n\ntest")],
    ),
    ("field names are case-sensitive", b"DATA: x\nData: y\n\n", []),
    # -- event: "Set the event type buffer to field value." An empty value means the
    #    default type "message", reported as None.
    ("wpt-format-field-event", b"event:test\ndata:x\n\ndata:x\n\n", [E("x", "test"), E("x")]),
    ("wpt-format-field-event-empty", b"event: \ndata:data\n\n", [E("data")]),
    ("event name keeps spaces and colons", b"event: a b:c\ndata: x\n\n", [E("x", "a b:c")]),
    ("the last event line wins", b"event: a\nevent: b\ndata: x\n\n", [E("x", "b")]),
    # "If the data buffer is an empty string, set the data buffer and the event type
    #  buffer to the empty string and return." No dispatch, but the event type resets.
    ("a block without data is not dispatched", b"event: foo\n\n", []),
    ("and it resets the event type", b"event: foo\n\ndata: a\n\n", [E("a")]),
    ("blank lines only", b"\n\n\r\n\r", []),
    ("empty input", b"", []),
    # -- id: "If the field value does not contain U+0000 NULL, then set the last event
    #    ID buffer to the field value. Otherwise, ignore the field." The buffer is not
    #    reset at dispatch: the id persists; an empty id resets it to "".
    (
        "wpt-format-field-id: the id persists",
        b"id: 1\ndata: a\n\ndata: b\n\n",
        [E("a", id="1"), E("b", id="1")],
    ),
    (
        "wpt-format-field-id-2: an empty id resets it",
        b"id: 1\ndata: a\n\nid:\ndata: b\n\ndata: c\n\n",
        [E("a", id="1"), E("b", id=""), E("c", id="")],
    ),
    (
        "id without a colon resets it",
        b"id: 1\ndata: a\n\nid\ndata: b\n\n",
        [E("a", id="1"), E("b", id="")],
    ),
    (
        "wpt-format-field-id-null: an id with NUL is ignored",
        b"id: 1\ndata: a\n\nid: 2\x00\ndata: b\n\nid: \x00\ndata: c\n\n",
        [E("a", id="1"), E("b", id="1"), E("c", id="1")],
    ),
    ("an id in a block without data persists", b"id: 7\n\ndata: a\n\n", [E("a", id="7")]),
    ("id after data in the same block", b"data: a\nid: 3\n\n", [E("a", id="3")]),
    ("id keeps a second space", b"id:  x\ndata: a\n\n", [E("a", id=" x")]),
    ("no id yet is None", b"data: a\n\n", [E("a", id=None)]),
    # -- retry: "If the field value consists of only ASCII digits, then interpret the
    #    field value as an integer in base ten ... Otherwise, ignore the field."
    ("retry: 1000", b"retry: 1000\ndata: a\n\n", [E("a", retry=1000)]),
    ("wpt-format-field-retry", b"retry:3000\ndata:x\n\n", [E("x", retry=3000)]),
    ("wpt-format-field-retry-bogus", b"retry:3000\x00\ndata:x\n\n", [E("x")]),
    ("retry: 1e3 is not digits", b"retry: 1e3\ndata: a\n\n", [E("a")]),
    ("retry with arabic-indic digits", "retry: \u0661\u0662\ndata: a\n\n".encode(), [E("a")]),
    ("retry with fullwidth digits", "retry: \uff11\uff12\ndata: a\n\n".encode(), [E("a")]),
    ("retry: -1", b"retry: -1\ndata: a\n\n", [E("a")]),
    ("retry: 1.5", b"retry: 1.5\ndata: a\n\n", [E("a")]),
    ("retry with two spaces", b"retry:  1000\ndata: a\n\n", [E("a")]),
    ("empty retry", b"retry:\ndata: a\n\nretry\ndata: b\n\n", [E("a"), E("b")]),
    ("retry: 0", b"retry: 0\ndata: a\n\n", [E("a", retry=0)]),
    ("retry leading zeros", b"retry: 007\ndata: a\n\n", [E("a", retry=7)]),
    (
        "the last valid retry wins",
        b"retry: 5\nretry: x\nretry: 7\nretry: y\ndata: a\n\n",
        [E("a", retry=7)],
    ),
    # Our frames report the retry field *of the block* (the reconnection time itself is
    # the consumer's state), so it does not carry over to the next block.
    ("retry is per block", b"retry: 5\ndata: a\n\ndata: b\n\n", [E("a", retry=5), E("b")]),
    ("retry in a block without data", b"retry: 5\n\ndata: a\n\n", [E("a")]),
    ("retry too long for int() is ignored", b"retry: " + b"9" * 5000 + b"\ndata: a\n\n", [E("a")]),
    # -- unknown fields: "Otherwise: The field is ignored."
    ("unknown fields", b"foo: bar\ndata: a\nbaz\n\n", [E("a")]),
    ("a field name with a trailing space is unknown", b"data : a\n\n", []),
    # -- UTF-8: "decoded using the UTF-8 decode algorithm" (invalid sequences -> U+FFFD)
    ("invalid utf-8 in data", b"data: \xff\xfeok\n\n", [E("\ufffd\ufffdok")]),
    ("truncated sequence before lf", b"data: \xe2\x82\n\n", [E("\ufffd")]),
    ("lone continuation byte", b"data: a\x80b\n\n", [E("a\ufffdb")]),
    (
        "invalid utf-8 in event and id",
        b"event: \xc3x\nid: \xff\ndata: a\n\n",
        [E("a", "\ufffdx", "\ufffd")],
    ),
    ("invalid utf-8 in a comment", b": \xffping\n", [C("\ufffdping")]),
    ("multi-byte characters", "data: é😀中\n\n".encode(), [E("é😀中")]),
    # -- end of input: "If the file ends in the middle of an event, before the final empty
    #    line, the incomplete event is not dispatched." We report it as truncation.
    (
        "wpt-format-data-before-final-empty-line",
        b"retry:1000\ndata:test1\n\nid:test\ndata:test2",
        [E("test1", retry=1000), T(23, 1)],
    ),
    ("unterminated data line", b"data: a", [T(0, 0)]),
    ("field line without the blank line", b"data: a\n", [T(0, 0)]),
    ("second event unterminated", b"data: a\n\ndata: b\n", [E("a"), T(9, 1)]),
    ("an event line alone is an unfinished event", b"data: a\n\nevent: x\n", [E("a"), T(9, 1)]),
    ("trailing comment at close is a comment", b"data: a\n\n: tail", [E("a"), C("tail")]),
    ("trailing comment inside an event", b"data: a\n: tail", [T(0, 0)]),
    ("comment line then unterminated field", b": c\ndata: a", [C("c"), T(4, 0)]),
    ("partial bom then end", b"\xef\xbb", [T(0, None)]),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_whatwg_case(data: bytes, expected: list[tuple[Any, ...]]) -> None:
    assert_chunking_invariant(Normalised, data, expected, seeds=10)


def test_case_names_are_unique() -> None:
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))
