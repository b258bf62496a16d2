"""Every framing buffer is bounded by a documented, configurable limit; past it the
decoder raises BufferLimitExceeded, fails fast and keeps memory near the limit.

The large inputs are generators of 1 MiB chunks. Memory is measured with tracemalloc
(peak of Python allocations while feeding, chunks allocated before tracing starts when
they are all the same object). No wall-clock assertion: "fast" is asserted as "fails
after about the limit's worth of input", by counting the bytes fed.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polystream.errors import BufferLimitExceeded
from polystream.wire.jsonarray import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENT_SIZE,
    JSONArrayDecoder,
)
from polystream.wire.sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE, SSEDecoder

MiB = 1024 * 1024
GiB = 1024 * MiB


def feed_until_error(decoder: Any, chunks: Iterator[bytes]) -> tuple[int, BufferLimitExceeded, int]:
    """Feed chunks until the decoder raises. Returns (bytes fed before the failing
    chunk, the error, peak traced memory in bytes)."""
    fed = 0
    tracemalloc.start()
    try:
        try:
            for chunk in chunks:
                decoder.feed(chunk)
                fed += len(chunk)
        except BufferLimitExceeded as exc:
            error = exc
        else:
            raise AssertionError(f"no BufferLimitExceeded after {fed} bytes")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return fed, error, peak


def same_chunk(head: bytes, chunk: bytes, total: int) -> Iterator[bytes]:
    """``head`` then ``chunk`` repeated (the SAME object) up to ``total`` bytes."""
    yield head
    yield from itertools.repeat(chunk, (total - len(head)) // len(chunk))


def fresh_chunks(head: bytes, make: Callable[[int], bytes], total: int) -> Iterator[bytes]:
    """``head`` then a NEW 1 MiB object each time, so that holding them costs memory."""
    yield head
    for i in range((total - len(head)) // MiB):
        yield make(i)


def test_documented_defaults() -> None:
    assert 32 * MiB == DEFAULT_MAX_LINE_SIZE
    assert 64 * MiB == DEFAULT_MAX_EVENT_SIZE
    assert 64 * MiB == DEFAULT_MAX_ELEMENT_SIZE
    assert DEFAULT_MAX_DEPTH == 128


def test_sse_one_gib_line_fails_after_the_line_limit() -> None:
    chunk = b"x" * MiB
    fed, error, peak = feed_until_error(SSEDecoder(), same_chunk(b"data: ", chunk, GiB))
    # "data: " and 31 chunks fit; the 32nd takes the line past 32 MiB and fails.
    assert fed == 6 + DEFAULT_MAX_LINE_SIZE - MiB
    assert error.byte_offset == 0
    assert error.dialect == "sse"
    assert "max_line_size" in str(error)
    assert peak < 3 * DEFAULT_MAX_LINE_SIZE


def test_sse_long_line_in_fresh_chunks_keeps_memory_near_the_limit() -> None:
    # Distinct chunk objects: the decoder really holds the unterminated line.
    def make(i: int) -> bytes:
        return bytes([97 + i % 26]) * MiB

    fed, error, peak = feed_until_error(SSEDecoder(), fresh_chunks(b"data: ", make, GiB))
    assert fed == 6 + DEFAULT_MAX_LINE_SIZE - MiB
    assert error.byte_offset == 0
    assert DEFAULT_MAX_LINE_SIZE - MiB < peak < 3 * DEFAULT_MAX_LINE_SIZE


def test_sse_event_of_many_lines_fails_after_the_event_limit() -> None:
    line = b"data: " + b"y" * (MiB - 7) + b"\n"  # one 1 MiB line, MiB - 7 bytes of data
    assert len(line) == MiB
    fed, error, peak = feed_until_error(SSEDecoder(), same_chunk(b"", line, GiB))
    # Each line adds MiB - 6 bytes (its data and the joining LF): 64 lines fit in
    # 64 MiB, the 65th does not.
    assert fed == 64 * MiB
    assert error.byte_offset == 0
    assert "max_event_size" in str(error)
    assert peak < 3 * DEFAULT_MAX_EVENT_SIZE


def test_sse_limits_are_configurable() -> None:
    chunk = b"z" * 1024
    fed, error, _ = feed_until_error(
        SSEDecoder(max_line_size=64 * 1024), same_chunk(b": ", chunk, 8 * MiB)
    )
    assert fed == 2 + 63 * 1024
    assert error.byte_offset == 0


def test_json_element_of_one_gib_fails_after_the_element_limit() -> None:
    chunk = b"x" * MiB
    fed, error, peak = feed_until_error(JSONArrayDecoder(), same_chunk(b'[{"a": "', chunk, GiB))
    assert fed == 8 + DEFAULT_MAX_ELEMENT_SIZE - MiB
    assert error.byte_offset == 1  # where the element began
    assert error.dialect == "json_array"
    assert "max_element_size" in str(error)
    assert peak < 3 * DEFAULT_MAX_ELEMENT_SIZE


def test_json_element_in_fresh_chunks_keeps_memory_near_the_limit() -> None:
    def make(i: int) -> bytes:
        return bytes([97 + i % 26]) * MiB

    limit = 16 * MiB
    fed, error, peak = feed_until_error(
        JSONArrayDecoder(max_element_size=limit), fresh_chunks(b'[1, "', make, GiB)
    )
    assert fed == 5 + limit - MiB
    assert error.byte_offset == 4
    assert error.event_index == 1
    assert limit - MiB < peak < 3 * limit


def test_json_one_gib_of_brackets_fails_at_the_depth_limit() -> None:
    chunk = b"[" * MiB
    fed, error, peak = feed_until_error(JSONArrayDecoder(), same_chunk(b"[", chunk, GiB))
    assert fed == 1  # the first chunk of brackets already nests too deep
    # The element starts at byte 1 (depth 1); depth 257 is the 257th bracket.
    assert error.byte_offset == 1 + DEFAULT_MAX_DEPTH
    assert "max_depth" in str(error)
    assert peak < 3 * MiB


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_json_depth_limit_is_configurable(depth: int) -> None:
    ok = JSONArrayDecoder(max_depth=depth)
    assert len(ok.feed(b"[" + b"[" * depth + b"]" * depth + b"]")) == 1
    over = JSONArrayDecoder(max_depth=depth)
    with pytest.raises(BufferLimitExceeded) as info:
        over.feed(b"[" + b"{" * (depth + 1))
    assert info.value.byte_offset == 1 + depth


def test_whitespace_between_elements_is_not_buffered() -> None:
    chunk = b" \r\n\t" * (MiB // 4)
    decoder = JSONArrayDecoder(max_element_size=1024)
    tracemalloc.start()
    try:
        decoder.feed(b"[1")
        for piece in itertools.repeat(chunk, 8):
            decoder.feed(piece)
        decoder.feed(b"]")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert decoder.close() == []
    assert decoder.elements_decoded == 1
    assert peak < MiB


def traced_peak(feed: Callable[[], Any]) -> tuple[Any, int]:
    """``feed()``'s result and the peak of Python allocations while it ran."""
    tracemalloc.start()
    try:
        result = feed()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def sse_frames(pieces: list[bytes], end: bytes) -> tuple[list[Any], int]:
    """What one SSEDecoder gives for ``end`` after ``pieces`` (which complete nothing),
    and the peak of Python allocations while it ran."""

    def feed() -> list[Any]:
        decoder = SSEDecoder()
        for piece in pieces:
            assert decoder.feed(piece) == []
        return decoder.feed(end)

    return traced_peak(feed)


def test_sse_event_of_many_short_lines_keeps_memory_near_its_size() -> None:
    # Each short data line is an object and a reference: kept apart, 100,000 of them
    # would take about 45 bytes each for 3 bytes of data (4.5 MB for 0.3 MB).
    lines = 100_000
    body = b"".join(b"data: %02d\n" % (i % 100) for i in range(lines))
    expected = "\n".join(f"{i % 100:02d}" for i in range(lines))
    pieces = [body[at : at + 65536] for at in range(0, len(body), 65536)]
    frames, peak = sse_frames(pieces, b"\n")
    assert [frame.data for frame in frames] == [expected]
    assert peak < 4 * len(expected)


def test_sse_line_trickled_in_small_chunks_keeps_memory_near_its_size() -> None:
    value = bytes(97 + i % 26 for i in range(256 * 1024))
    body = b"data: " + value
    pieces = [body[at : at + 4] for at in range(0, len(body), 4)]  # distinct objects
    frames, peak = sse_frames(pieces, b"\n\n")
    assert [frame.data for frame in frames] == [value.decode()]
    assert peak < 4 * len(value)


def test_json_element_trickled_in_small_chunks_keeps_memory_near_its_size() -> None:
    value = bytes(97 + i % 26 for i in range(256 * 1024))
    body = b'[{"a": "' + value + b'"}'
    pieces = [body[at : at + 4] for at in range(0, len(body), 4)]

    def feed() -> list[Any]:
        decoder = JSONArrayDecoder()
        out = []
        for piece in pieces:
            out += decoder.feed(piece)
        return out + decoder.feed(b"]")

    elements, peak = traced_peak(feed)
    assert [element.data for element in elements] == [body[1:]]
    assert peak < 4 * len(value)
