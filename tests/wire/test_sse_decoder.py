"""SSEDecoder behaviour beyond the WHATWG table: chunk boundaries, offsets and
indices, the close/feed contract, limits in brief, and property tests (hypothesis)
against a reference parser written straight from the spec's text."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polystream.errors import (
    BufferLimitExceeded,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTruncated,
)
from polystream.wire.sse import ServerSentEvent, SSEComment, SSEDecoder
from tests.helpers import assert_chunking_invariant, feed_all, split_at

BOM = b"\xef\xbb\xbf"


def ev(frame: Any) -> tuple[Any, ...]:
    assert isinstance(frame, ServerSentEvent)
    return (frame.data, frame.event, frame.id, frame.retry)


# -- chunk boundaries ---------------------------------------------------------------------


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The LF completes the CRLF: it must not end a second (blank) line, which would
    # dispatch "a" on its own.
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n") == []
    frames = decoder.feed(b"\r\n")
    assert [ev(f) for f in frames] == [("a\nb", None, None, None)]
    assert decoder.close() == []


def test_cr_at_chunk_end_then_cr_is_a_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert [ev(f) for f in decoder.feed(b"\r")] == [("a", None, None, None)]


def test_cr_at_chunk_end_then_text_starts_a_new_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"data: b\r") == []
    assert [ev(f) for f in decoder.feed(b"\r")] == [("a\nb", None, None, None)]


def test_cr_at_chunk_end_survives_an_empty_feed() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\r")
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []  # still the LF of that CRLF
    assert [ev(f) for f in decoder.feed(b"\n")] == [("a", None, None, None)]


@pytest.mark.parametrize("text", ["é", "€", "😀", "中文"])
def test_multibyte_character_split_at_every_byte(text: str) -> None:
    data = f"event: {text}\ndata: {text}\n\n".encode()
    for cut in range(len(data) + 1):
        frames = feed_all(SSEDecoder, [data[:cut], data[cut:]])
        assert [ev(f) for f in frames] == [(text, text, None, None)]


def test_bom_split_across_chunks() -> None:
    for cuts in ([1], [2], [1, 2], [3], [1, 4]):
        chunks = split_at(BOM + b"data: a\n\n", cuts)
        frames = feed_all(SSEDecoder, chunks)
        assert [ev(f) for f in frames] == [("a", None, None, None)], cuts
        assert frames[0].offset == 3


def test_event_is_returned_by_the_feed_that_completes_it() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: x\ndata: 1\n") == []
    frames = decoder.feed(b"\ndata: 2")
    assert [ev(f) for f in frames] == [("1", "x", None, None)]
    assert decoder.feed(b"\n") == []
    assert [ev(f) for f in decoder.feed(b"\n")] == [("2", None, None, None)]


def test_comment_is_returned_as_soon_as_its_line_ends() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n: pi") == []
    assert decoder.feed(b"ng\n") == [SSEComment("ping", 8)]


# -- offsets and indices ------------------------------------------------------------------


def test_offsets_and_indices() -> None:
    data = b": hi\nid: 1\ndata: a\n\n: c\n\nevent: e\r\ndata: b\r\n\r\nretry: 9\n\ndata: c\r\r"
    frames = assert_chunking_invariant(SSEDecoder, data)
    assert frames == [
        SSEComment("hi", 0),
        ServerSentEvent("a", None, "1", None, data.index(b"id: 1"), 0),
        SSEComment("c", data.index(b": c")),
        ServerSentEvent("b", "e", "1", None, data.index(b"event: e"), 1),
        # the "retry: 9" block has no data: no event, no index used
        ServerSentEvent("c", None, "1", None, data.index(b"data: c"), 2),
    ]


def test_offsets_count_the_bom() -> None:
    frames = feed_all(SSEDecoder, [BOM + b"data: a\n\n: x\n"])
    assert frames == [ServerSentEvent("a", offset=3, index=0), SSEComment("x", 12)]


def test_offsets_are_absolute_across_chunks() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n\n")
    decoder.feed(b"da")
    frames = decoder.feed(b"ta: b\n\n")
    assert frames == [ServerSentEvent("b", offset=9, index=1)]
    assert decoder.events_dispatched == 2
    assert decoder.bytes_consumed == 18


# -- blocks read by the caller (idle, skip) ------------------------------------------------


@pytest.mark.parametrize(
    ("fed", "idle"),
    [
        ([], False),  # a BOM may still come
        ([b"\xef"], False),  # part of one
        ([b"data: a\n\n"], True),
        ([b"data: a\r\n\r\n"], True),
        ([b": ping\n"], True),  # a comment opens no event
        ([b"data: a\n"], False),  # the event is open
        ([b"id: 1\n"], False),
        ([b"data: a\n\ndat"], False),  # a line under way
        ([b"data: a\r\n\r"], False),  # a CR waiting for its LF
        ([b"data: a\r\n\r", b"\n"], True),
        ([b"data: a\n\n", b""], True),
    ],
)
def test_idle_only_at_a_block_boundary(fed: list[bytes], idle: bool) -> None:
    decoder = SSEDecoder()
    for chunk in fed:
        decoder.feed(chunk)
    assert decoder.idle is idle
    # What a caller that takes blocks itself needs, in one call, only while idle.
    expected = (decoder.events_dispatched, decoder.bytes_consumed)
    assert decoder.takeover() == (expected if idle else None)


def test_takeover_after_blocks_and_skips() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"\xef\xbb\xbfdata: a\n\n: c\n")
    assert decoder.takeover() == (1, 16)  # the BOM and the comment counted
    decoder.skip(len(b"data: b\r\n\r\n"), 1)
    assert decoder.takeover() == (2, 27)
    decoder.feed(b"data: c\n")
    assert decoder.takeover() is None  # an event open
    decoder.feed(b"\n")
    assert decoder.takeover() == (3, 36)
    decoder.close()
    assert decoder.takeover() is None


def test_not_idle_after_close_or_a_limit() -> None:
    closed = SSEDecoder()
    closed.feed(b"data: a\n\n")
    closed.close()
    assert not closed.idle
    failed = SSEDecoder(max_line_size=4)
    with pytest.raises(BufferLimitExceeded):
        failed.feed(b"data: long\n\n")
    assert not failed.idle


def test_skipped_blocks_count_as_if_fed() -> None:
    # A caller takes the middle blocks itself: the frames after them have the
    # offsets and indexes of a decoder fed everything, and the last ID carries on.
    head = b"id: 7\ndata: a\n\n"
    middle = b"data: b\r\n\r\ndata: c\n\n"
    rest = b": x\ndata: d\n\n"
    whole = feed_all(SSEDecoder, [head + middle + rest])
    decoder = SSEDecoder()
    frames = decoder.feed(head)
    assert decoder.idle
    decoder.skip(len(middle), 2)
    assert decoder.events_dispatched == 3
    assert decoder.bytes_consumed == len(head + middle)
    frames += decoder.feed(rest)
    assert frames == [f for f in whole if not (isinstance(f, ServerSentEvent) and f.data in "bc")]
    assert frames[-1] == ServerSentEvent("d", None, "7", None, len(head + middle) + 4, 3)


@pytest.mark.parametrize("fed", [b"", b"data: a\n", b"data: a\n\nda"])
def test_skip_refused_unless_idle(fed: bytes) -> None:
    decoder = SSEDecoder()
    decoder.feed(fed)
    with pytest.raises(LocalProtocolError, match="skip"):
        decoder.skip(9, 1)
    assert decoder.bytes_consumed == len(fed)


def test_last_event_id_property() -> None:
    decoder = SSEDecoder()
    assert decoder.last_event_id is None
    decoder.feed(b"id: 5\n\n")
    assert decoder.last_event_id == "5"
    decoder.feed(b"id\n\n")
    assert decoder.last_event_id == ""


# -- the feed / close contract ------------------------------------------------------------


def test_feed_after_close_is_a_local_error() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n\n")
    assert decoder.close() == []
    with pytest.raises(LocalProtocolError):
        decoder.feed(b"data: b\n\n")


def test_close_twice_is_safe() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n\n: tail")
    assert decoder.close() == [SSEComment("tail", 9)]
    assert decoder.close() == []


def test_close_twice_after_truncation() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a")
    with pytest.raises(StreamTruncated) as info:
        decoder.close()
    assert (info.value.byte_offset, info.value.event_index, info.value.dialect) == (0, 0, "sse")
    assert isinstance(info.value, RemoteProtocolError)
    assert decoder.close() == []


def test_truncation_is_never_delivered_as_an_event() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed(b"data: a\n\nevent: x\ndata: partial\n")
    assert [ev(f) for f in frames] == [("a", None, None, None)]
    with pytest.raises(StreamTruncated) as info:
        decoder.close()
    assert info.value.byte_offset == 9
    assert info.value.event_index == 1
    assert "byte 9" in str(info.value)


def test_empty_feed_returns_nothing() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.close() == []


@pytest.mark.parametrize("kwargs", [{"max_line_size": 0}, {"max_event_size": 0}])
def test_limits_must_be_positive(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        SSEDecoder(**kwargs)


# -- limits (the large-input tests are in test_limits.py) --------------------------------


def test_line_limit_is_exact() -> None:
    line = b"data: " + b"x" * 10  # 16 bytes
    ok = SSEDecoder(max_line_size=16)
    assert [ev(f) for f in ok.feed(line + b"\n\n")] == [("x" * 10, None, None, None)]
    over = SSEDecoder(max_line_size=15)
    over.feed(b"data: a\n\n")
    with pytest.raises(BufferLimitExceeded) as info:
        over.feed(line + b"\n\n")
    assert (info.value.byte_offset, info.value.event_index) == (9, 1)


def test_line_limit_without_newline_counts_across_chunks() -> None:
    decoder = SSEDecoder(max_line_size=10)
    decoder.feed(b"data: ")
    decoder.feed(b"1234")
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(b"5")
    assert info.value.byte_offset == 0
    # The decoder stays failed, and never reports a clean end.
    with pytest.raises(BufferLimitExceeded):
        decoder.feed(b"\n\n")
    with pytest.raises(BufferLimitExceeded):
        decoder.close()
    assert decoder.close() == []


def test_frames_before_a_limit_error_are_delivered_first() -> None:
    decoder = SSEDecoder(max_line_size=15)
    frames = decoder.feed(b": k\ndata: a\n\ndata: " + b"x" * 20 + b"\n\n")
    assert frames == [SSEComment("k", 0), ServerSentEvent("a", offset=4, index=0)]
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(b"data: b\n\n")
    assert (info.value.byte_offset, info.value.event_index) == (13, 1)
    with pytest.raises(BufferLimitExceeded):
        decoder.close()


def test_event_limit_counts_the_joined_data() -> None:
    # "aaaa\nbbbb" is 9 bytes: fits a 9-byte limit, not an 8-byte one.
    data = b"data: aaaa\ndata: bbbb\n\n"
    assert [ev(f) for f in SSEDecoder(max_event_size=9).feed(data)] == [
        ("aaaa\nbbbb", None, None, None)
    ]
    decoder = SSEDecoder(max_event_size=8)
    decoder.feed(b"data: a\n\n")
    with pytest.raises(BufferLimitExceeded) as info:
        decoder.feed(data)
    assert (info.value.byte_offset, info.value.event_index) == (9, 1)


def test_limit_error_is_chunking_invariant() -> None:
    data = b"data: a\n\n: c\ndata: " + b"y" * 40 + b"\n\ndata: z\n\n"

    def run(chunks: list[bytes]) -> tuple[list[Any], tuple[int | None, int | None]]:
        decoder = SSEDecoder(max_line_size=32)
        frames: list[Any] = []
        try:
            for chunk in chunks:
                frames += decoder.feed(chunk)
            decoder.close()
        except BufferLimitExceeded as exc:
            return frames, (exc.byte_offset, exc.event_index)
        raise AssertionError("no error")

    whole = run([data])
    assert whole == (
        [ServerSentEvent("a", offset=0, index=0), SSEComment("c", 9)],
        (13, 1),
    )
    assert run([data[i : i + 1] for i in range(len(data))]) == whole
    for cut in range(len(data) + 1):
        assert run([data[:cut], data[cut:]]) == whole


# -- property tests -----------------------------------------------------------------------

_LINE_END = re.compile(r"\r\n|\r|\n")


def reference_parse(data: bytes) -> tuple[list[tuple[Any, ...]], bool]:
    """The WHATWG algorithm, transcribed: decode the whole stream (stripping one BOM),
    split it into lines, and process them. Returns the frames (events and comments,
    without offsets) and whether the input ended inside an event."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.decode("utf-8", "replace")
    frames: list[tuple[Any, ...]] = []
    buffer: list[str] = []
    event_type = ""
    last_id: str | None = None
    retry: int | None = None
    in_event = False
    pos = 0
    for match in _LINE_END.finditer(text):
        line = text[pos : match.start()]
        pos = match.end()
        if line == "":
            if buffer:
                frames.append(("\n".join(buffer), event_type or None, last_id, retry))
            buffer, event_type, retry, in_event = [], "", None, False
            continue
        if line.startswith(":"):
            comment = line[1:]
            frames.append(("comment", comment[1:] if comment.startswith(" ") else comment))
            continue
        in_event = True
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            buffer.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\x00" not in value:
                last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    tail = text[pos:]
    if tail.startswith(":") and not in_event:
        comment = tail[1:]
        frames.append(("comment", comment[1:] if comment.startswith(" ") else comment))
        tail = ""
    return frames, in_event or bool(tail)


def run_decoder(chunks: list[bytes]) -> tuple[list[tuple[Any, ...]], bool]:
    decoder = SSEDecoder()
    frames: list[Any] = []
    for chunk in chunks:
        frames += decoder.feed(chunk)
    truncated = False
    try:
        frames += decoder.close()
    except StreamTruncated:
        truncated = True
    out: list[tuple[Any, ...]] = []
    for frame in frames:
        out.append(("comment", frame.text) if isinstance(frame, SSEComment) else ev(frame))
    return out, truncated


_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" :a1é€😀中\x00\t\u2028\x85")),
        st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"),
    ),
    max_size=12,
)
_VALUE = st.one_of(
    _TEXT.map(str.encode),
    # raw bytes, including invalid UTF-8 and a stray BOM
    st.binary(max_size=6).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.sampled_from([b"\xff", b"\xe2\x82", b"\xef\xbb\xbf", b"1000", b"1e3", "١٢".encode()]),
)
_NAME = st.sampled_from(
    [b"data", b"data", b"data", b"event", b"id", b"retry", b"foo", b"Data", b"data ", b""]
)
_LINE = st.one_of(
    st.tuples(_NAME, st.sampled_from([b":", b": ", b":  "]), _VALUE).map(b"".join),
    _NAME,  # a field without a colon
    st.tuples(st.just(b":"), _VALUE).map(b"".join),  # a comment
    st.just(b""),  # a blank line: dispatch
)
_EOL = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_LINE, _EOL), max_size=14))
    body = b"".join(line + eol for line, eol in lines)
    # Sometimes end with a blank line (a complete stream), sometimes mid-line.
    ending = draw(st.sampled_from([b"", b"\n", b"\n\n", b"\r\n\r\n", b"data: x", b": k"]))
    bom = draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf"]))
    data = bom + body + ending
    # A CR directly followed by an LF from the next line end would merge into CRLF:
    # that is a different stream, which the reference parses just the same.
    return data


@given(data=sse_streams())
def test_matches_the_reference_parser(data: bytes) -> None:
    assert run_decoder([data]) == reference_parse(data)


@given(data=sse_streams(), cuts=st.lists(st.integers(min_value=0), max_size=10))
def test_same_frames_whatever_the_chunking(data: bytes, cuts: list[int]) -> None:
    whole = run_decoder([data])
    assert run_decoder([data[i : i + 1] for i in range(len(data))]) == whole
    assert run_decoder(split_at(data, cuts)) == whole


@given(data=sse_streams(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_offsets_are_chunking_invariant(data: bytes, cuts: list[int]) -> None:
    def frames(chunks: list[bytes]) -> list[Any]:
        decoder = SSEDecoder()
        out: list[Any] = []
        for chunk in chunks:
            out += decoder.feed(chunk)
        return out

    whole = frames([data])
    assert frames(split_at(data, cuts)) == whole
    # Every event's offset points at the start of a line of the input.
    for frame in whole:
        offset = frame.offset
        assert (
            offset == 0
            or data[offset - 1 : offset] in (b"\n", b"\r")
            or (offset == 3 and data.startswith(BOM))
        )
    indices = [f.index for f in whole if isinstance(f, ServerSentEvent)]
    assert indices == list(range(len(indices)))
