"""The SSE decoder's fast path (``SSEDecoder._scan``) against the line machine alone
(``SSEDecoder(fast=False)``): the same frames, offsets, indices, ``id`` persistence, errors and
close() outcome on every input and chunking, and a bounded number of bytes searched
whatever the chunking (no quadratic rescans)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, SupportsIndex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.errors import ProtocolError
from polystream.wire.sse import ServerSentEvent, SSEDecoder, SSEFrame
from tests.helpers import split_at

BOM = b"\xef\xbb\xbf"
FIXTURES = Path(__file__).parent.parent / "fixtures"


def outcome(
    chunks: list[bytes], *, fast: bool, max_line: int = 1 << 20, max_event: int = 1 << 20
) -> list[Any]:
    """Everything observable: each feed's frames or error, the properties after it, then
    close()'s frames or error. Feeding goes on after an error (it must raise again)."""
    decoder = SSEDecoder(max_line_size=max_line, max_event_size=max_event, fast=fast)
    seen: list[Any] = []

    def error(exc: ProtocolError) -> tuple[Any, ...]:
        return (type(exc).__name__, exc.message, exc.event_index, exc.byte_offset)

    for chunk in chunks:
        try:
            frames = decoder.feed(chunk)
            seen.append(("frames", [(type(f).__name__, f) for f in frames]))
        except ProtocolError as exc:
            seen.append(("error", error(exc)))
        seen.append((decoder.last_event_id, decoder.events_dispatched, decoder.bytes_consumed))
    try:
        seen.append(("close", decoder.close()))
    except ProtocolError as exc:
        seen.append(("close error", error(exc)))
    return seen


def assert_same(chunks: list[bytes], **limits: int) -> None:
    assert outcome(chunks, fast=True, **limits) == outcome(chunks, fast=False, **limits)


def events(frames: list[SSEFrame]) -> list[ServerSentEvent]:
    """The frames, all of them events."""
    assert all(type(frame) is ServerSentEvent for frame in frames)
    return [frame for frame in frames if isinstance(frame, ServerSentEvent)]


def chunkings(data: bytes) -> list[list[bytes]]:
    """Whole, byte by byte, every two-way split, and a few random splits."""
    out = [[data], [data[i : i + 1] for i in range(len(data))]]
    out += [[data[:i], data[i:]] for i in range(1, len(data))]
    rng = random.Random(len(data))
    for _ in range(5):
        out.append(split_at(data, [rng.randrange(len(data) + 1) for _ in range(4)]))
    return out


# -- hand-picked cases --------------------------------------------------------------------

CASES = [
    b"data: a\n\n",
    b"data:a\n\n",
    b"data:  two spaces\n\n",
    b"data\n\n",
    b"data:\n\n",
    b"data: \n\n",
    b"event: e\ndata: a\n\n",
    b"event:e\ndata:a\n\n",
    b"event:\ndata: a\n\n",
    b"event: \ndata: a\n\n",
    b"event\ndata: a\n\n",
    b"eventx: y\ndata: a\n\n",
    b"event: a\nevent: b\ndata: x\n\n",
    b"event: only\n\ndata: b\n\n",
    b"event: e\n\n",
    b"data: a\ndata: b\n\n",
    b"event: e\ndata: a\ndata: b\n\n",
    b"data: a\nevent: e\n\n",
    b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: x\x00y\ndata: d\n\n",
    b"event: e\nid: 7\ndata: a\n\ndata: b\n\n",
    b"id: 5\n\ndata: after an id alone\n\n",
    b"retry: 10\ndata: a\n\ndata: b\n\n",
    b"retry: x\ndata: a\n\n",
    b"data: a\nretry: 10\n\ndata: b\n\n",
    b": ping\n\ndata: a\n\n:\n\n:nospace\n",
    b"data: a\n: comment inside\n\n",
    b"event: e\n: c\ndata: a\n\n",
    b": trailing comment",
    b"data: trailing field",
    b"data: a\n",
    b"data: a\n\ndata: b",
    b"foo: bar\ndata: a\n\n",
    b"nocolon\n\n",
    b"\n\n\n\ndata: a\n\n\n\n",
    b"\xef\xbb\xbfdata: bom\n\n",
    b"\xef\xbb\xbf\xef\xbb\xbfdata: two boms\n\n",
    b"\xef\xbbdata: half bom\n\n",
    b"data: caf\xc3\xa9 \xe2\x82\n\nevent: \xff\ndata: \xf0\x9f\x98\x80\n\n",
    # CRLF, CR and mixed line ends
    b"data: a\r\n\r\n",
    b"data: a\r\n\r\ndata: b\r\n\r\n",
    b"event: e\r\ndata: a\r\n\r\n",
    b"data: a\r\rdata: b\r\r",
    b"data: a\rdata: b\r\r",
    b"data: a\n\r\n",
    b"data: a\r\n\n",
    b"data: a\n\r",
    b"data: a\r\n\r",
    b"data: a\r\r\n",
    b"data: a\n\rdata: b\n\n",
    b"data: a\rb\r\n\r\n",
    b"data: a\rb\n\n",
    b"event: e\rdata: a\n\n",
    b"event: e\ndata: a\r\n\n",
    b"event: e\ndata: a\n\r\n",
    b"event: e\ndata: a\rdata: b\n\n",
    b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n",
    b"\r\n\r\ndata: a\r\n\r\n",
    b"\r\rdata: a\n\n",
    b": c\r\n\r\ndata: a\r\n\r\n",
    b"id: 1\r\ndata: a\r\n\r\n",
    b"data: a\r\n\r\n\r\n\r\ndata: b\r\n\r\n",
    # runs of the common shapes, broken in every way
    b"data: a\n\ndata: b\n\ndata: c\r\n\r\ndata: d\r\n\r\ndata: e\n\ndata: f\n\n",
    b"data: a\n\ndata: b\ndata: c\n\ndata: d\n\n",
    b"data: a\n\ndata:b\n\ndata: c\n\n",
    b"data: a\r\n\r\ndata: b\r\n\ndata: c\n\r\ndata: d\r\n\r\n",
    b"data: a\r\n\r\ndata: b\r\rdata: c\r\n\r\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: b\ndata: 3\n\nevent: a\ndata: 4\n\n",
    b"event: a\ndata: 1\n\nevent: a\ndata:2\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\r\ndata: 2\r\n\r\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: ab\ndata: 2\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a:data: 2\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\rdata: 2\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\ndata: 3\n\nevent: a\ndata: 4\n\n",
    b"event: a\ndata: 1\n\nevent: a\n\nevent: a\ndata: 2\n\n",
    b"event: a\ndata: 1\n\ndata: 2\n\nevent: a\ndata: 3\n\n: c\n\nevent: a\ndata: 4\n\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\rdata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\nid: 9\ndata: 2\n\nevent: a\ndata: 3\n\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: a\ndata: 3",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: a\n",
    b"event: a\ndata: 1\n\nevent: a\ndata: 2\n\nevent: a",
    # an ``id:`` line before a block of a common shape
    b"id: 1\ndata: a\n\nid: 2\ndata: b\n\ndata: c\n\nid: 3\ndata: d\n\n",
    b"id: 1\nevent: a\ndata: x\n\nid: 2\nevent: a\ndata: y\n\nevent: a\ndata: z\n\n",
    b"id: 1\r\ndata: a\r\n\r\nid: 2\ndata: b\r\n\r\n",
    b"id: 1\rdata: a\n\n",
    b"id: 1\n\ndata: a\n\n",
    b"id: 1\nid: 2\ndata: a\n\n",
    b"id: 1\nretry: 5\ndata: a\n\n",
    b"id: \x00\ndata: a\n\nid\ndata: b\n\nid:\ndata: c\n\n",
    b"id: 1\ndata: a\ndata: b\n\n",
    b"id: 1\ndata: a",
    b"id: 1",
    # everything at once, in each line ending and mixed, ending without a blank line
    b"\xef\xbb\xbf: hello\nid: 1\nevent: e\nretry: 30\ndata: a\ndata: b\n\n"
    b"id: x\x00\ndata: c\n: c\n\ndata: d\nid: 2\nevent: f\n\ndata: open",
    b"\xef\xbb\xbf: hello\r\nid: 1\r\nevent: e\r\nretry: 30\r\ndata: a\r\ndata: b\r\n\r\n"
    b"id: x\x00\r\ndata: c\r\n: c\r\n\r\ndata: d\r\nid: 2\r\nevent: f\r\n\r\ndata: open\r\n",
    b"\xef\xbb\xbf: hello\rid: 1\revent: e\rretry: 30\rdata: a\rdata: b\r\r"
    b"id: x\x00\rdata: c\r: c\r\rdata: d\rid: 2\revent: f\r\r: closing comment",
    b"id: 1\r\nevent: e\ndata: a\rdata: b\r\n\nretry: 5\rid: \x00\r\ndata: c\n\r"
    b"data: d\n\ndata: e\r\n\r\nevent: g\rdata: f",
]


@pytest.mark.parametrize("data", CASES)
def test_hand_picked_cases_in_every_chunking(data: bytes) -> None:
    for chunks in chunkings(data):
        assert_same(chunks)


@pytest.mark.parametrize(
    "data",
    [
        b"data: 0123456789\n\ndata: 01234567890123456789\n\n",
        b"event: e\ndata: 0123456789\n\nevent: e\ndata: 01234567890123456789\n\n",
        b"data: 0123456789\r\n\r\ndata: 01234567890123456789\r\n\r\n",
        b"data: 0123456789\ndata: 0123456789\n\n",
        b": a long comment line here\n\n",
        b"event: a-very-long-event-name\ndata: x\n\n",
        b"id: a-very-long-identifier\ndata: x\n\n",
        b"id: 1\ndata: 0123456789\n\nid: 2\ndata: 01234567890123456789\n\n",
        b"id: 1\nevent: e\ndata: 0123456789\n\nid: 2\nevent: e\ndata: 01234567890123\n\n",
        b"data: 0123456789",
    ],
)
@pytest.mark.parametrize(("max_line", "max_event"), [(12, 100), (100, 12), (18, 18), (25, 15)])
def test_limits_in_every_chunking(data: bytes, max_line: int, max_event: int) -> None:
    for chunks in chunkings(data):
        assert_same(chunks, max_line=max_line, max_event=max_event)


def test_fixtures_whole_and_in_small_chunks() -> None:
    paths = sorted(FIXTURES.rglob("*.sse"))
    assert paths
    for path in paths:
        data = path.read_bytes()
        for chunks in ([data], split_at(data, range(0, len(data), 7))):
            assert_same(chunks)
        # the same stream with CRLF and with CR line ends
        for end in (b"\r\n", b"\r"):
            other = data.replace(b"\n", end)
            assert_same([other])
            assert_same(split_at(other, range(0, len(other), 13)))


def test_id_persists_between_the_two_paths() -> None:
    # The id set by a block the line machine takes stays for the blocks the fast path
    # takes, and the other way round.
    data = b"id: 1\nretry: 5\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\nretry: 1\ndata: d\n\n"
    decoder = SSEDecoder()
    frames = events(decoder.feed(data))
    assert [(f.data, f.id, f.retry) for f in frames] == [
        ("a", "1", 5),
        ("b", "1", None),
        ("c", "2", None),
        ("d", "2", 1),
    ]
    assert [f.offset for f in frames] == [0, 24, 33, 48]
    assert [f.index for f in frames] == [0, 1, 2, 3]


def test_bytes_like_chunks() -> None:
    data = b"event: a\ndata: x\n\nevent: a\ndata: y\n\n"
    expected = SSEDecoder().feed(data)
    assert SSEDecoder().feed(bytearray(data)) == expected
    assert SSEDecoder().feed(memoryview(data)) == expected


def test_event_name_cache_is_bounded() -> None:
    decoder = SSEDecoder()
    data = b"".join(b"event: e%d\ndata: x\n\n" % i for i in range(500))
    frames = events(decoder.feed(data))
    assert [f.event for f in frames] == [f"e{i}" for i in range(500)]
    assert len(decoder._names) <= 64
    long_name = b"event: " + b"n" * 1000 + b"\ndata: x\n\n"
    decoder = SSEDecoder()
    assert events(decoder.feed(long_name * 2))[1].event == "n" * 1000
    assert not decoder._names


# -- property tests -----------------------------------------------------------------------

LINES = st.sampled_from(
    [
        b"data: x",
        b"data:y",
        b"data",
        b"data:",
        b"data:  z",
        b"data: caf\xc3\xa9",
        b"data: \xe2\x82",
        b"event: e",
        b"event:f",
        b"event:",
        b"event",
        b"id: 1",
        b"id:",
        b"id",
        b"id: a\x00",
        b"retry: 7",
        b"retry: no",
        b": ping",
        b":",
        b"foo: bar",
        b"nocolon",
        b"",
        b"",
        BOM,
    ]
)
ENDS = st.sampled_from([b"\n", b"\n", b"\r\n", b"\r\n", b"\r"])
TEXT = st.binary(max_size=6).map(
    lambda b: bytes(c for c in b if c not in b"\r\n")
) | st.sampled_from([b"a", b"bc", b"\xc3\xa9"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts: list[bytes] = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from([BOM, BOM[:2], b""])))
    uniform = draw(st.booleans())
    end = draw(ENDS)
    for _ in range(draw(st.integers(0, 14))):
        line = draw(LINES)
        if line and draw(st.integers(0, 4)) == 0:
            line += draw(TEXT)
        parts.append(line + (end if uniform else draw(ENDS)))
    if draw(st.booleans()):
        parts.append(draw(LINES))  # an unterminated last line
    return b"".join(parts)


BLOCKS = st.sampled_from(
    [
        [b"data: x"],
        [b"data: y"],
        [b"data: \xc3\xa9"],
        [b"data: "],
        [b"data:z"],
        [b"event: a", b"data: x"],
        [b"event: a", b"data: y"],
        [b"event: b", b"data: x"],
        [b"event: a", b"data:x"],
        [b"event: a", b"data"],
        [b"event:", b"data: x"],
        [b"event: a"],
        [b"event: a", b"id: 1", b"data: x"],
        [b"event: a", b"data: x", b"data: y"],
        [b"event: a", b": c", b"data: x"],
        [b"id: 2", b"data: x"],
        [b"id: 3", b"event: a", b"data: x"],
        [b"id:4", b"data: y"],
        [b"id: 5\x00", b"data: x"],
        [b"id: 6", b"data:x"],
        [b"id: 7", b"retry: 1", b"data: x"],
        [b"id: 8"],
        [b"id: 9", b": c", b"data: x"],
        [b"retry: 3", b"data: x"],
        [b": ping"],
        [b"data: x", b"event: a"],
    ]
)


@st.composite
def block_streams(draw: st.DrawFn) -> bytes:
    """Whole blocks, mostly of the common shapes, so that runs of them are frequent."""
    end = draw(ENDS)
    uniform = draw(st.integers(0, 3)) != 0
    parts: list[bytes] = []
    for block in draw(st.lists(BLOCKS, max_size=12)):
        for line in [*block, b""]:
            parts.append(line + (end if uniform else draw(ENDS)))
    if draw(st.booleans()):
        parts.append(draw(LINES))
    return b"".join(parts)


@settings(max_examples=400)
@given(data=block_streams(), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_runs_of_blocks_same_as_the_line_machine(data: bytes, cuts: list[int]) -> None:
    assert_same([data])
    assert_same(split_at(data, cuts))


@settings(max_examples=200)
@given(data=block_streams(), max_line=st.integers(1, 12), max_event=st.integers(1, 12))
def test_runs_of_blocks_with_small_limits(data: bytes, max_line: int, max_event: int) -> None:
    assert_same([data], max_line=max_line, max_event=max_event)


@settings(max_examples=400)
@given(data=streams(), cuts=st.lists(st.integers(min_value=0), max_size=8))
def test_same_as_the_line_machine(data: bytes, cuts: list[int]) -> None:
    assert_same([data])
    assert_same(split_at(data, cuts))


@settings(max_examples=150)
@given(data=streams())
def test_same_as_the_line_machine_byte_by_byte(data: bytes) -> None:
    assert_same([data[i : i + 1] for i in range(len(data))])


@settings(max_examples=300)
@given(
    data=streams(),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
    max_line=st.integers(1, 12),
    max_event=st.integers(1, 12),
)
def test_same_as_the_line_machine_with_small_limits(
    data: bytes, cuts: list[int], max_line: int, max_event: int
) -> None:
    assert_same(split_at(data, cuts), max_line=max_line, max_event=max_event)


# -- one block per feed ---------------------------------------------------------------------

_BLOCK_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)|(?<=\r\r)")


def per_block(data: bytes) -> list[bytes]:
    """``data`` cut after every blank line: a network read per block, as a stream
    arrives one event at a time."""
    return [piece for piece in _BLOCK_END.split(data) if piece]


class _Counting(SSEDecoder):
    """Counts the lines the line machine applied (``_line``) and the calls of the fast
    path (``_scan``)."""

    lines = 0
    scans = 0

    def _line(self, line: bytes, line_start: int, out: list[SSEFrame]) -> None:
        self.lines += 1
        super()._line(line, line_start, out)

    def _scan(
        self, data: bytes, pos: int, base: int, crn: int, out: list[SSEFrame]
    ) -> tuple[int, int, int]:
        self.scans += 1
        return super()._scan(data, pos, base, crn, out)


def feeds_taken_whole(chunks: list[bytes], **limits: int) -> int:
    """How many feeds completed without an error and without the line machine: the
    fast path took every line of them."""
    decoder = _Counting(
        max_line_size=limits.get("max_line", 1 << 20),
        max_event_size=limits.get("max_event", 1 << 20),
    )
    taken = 0
    for chunk in chunks:
        before = decoder.lines
        try:
            decoder.feed(chunk)
        except ProtocolError:
            continue
        taken += decoder.lines == before
    return taken


@pytest.mark.parametrize("data", CASES)
def test_hand_picked_cases_one_block_per_feed(data: bytes) -> None:
    assert_same(per_block(data))


@pytest.mark.parametrize(
    ("block", "taken"),
    [
        (b"data: a\n\n", 2),
        (b"data: \n\n", 2),
        (b"data: caf\xc3\xa9 \xff\n\n", 2),
        (b"event: e\ndata: a\n\n", 2),
        (b"event:e\ndata: a\n\n", 2),
        (b"event:\ndata: a\n\n", 2),
        (b"event: \xff\ndata: a\n\n", 2),
        (b"data: a\r\n\r\n", 2),
        (b"data:a\n\n", 2),
        (b"data: a\n\ndata: b\n\n", 2),
        (b"event: e\n\n", 2),
        (b"event: e\ndata:a\n\n", 2),
        (b"event: e\nid: 1\ndata: a\n\n", 2),
        (b"event: e\ndata: a\nid: 1\n\n", 2),
        (b"event: e\r\ndata: a\r\n\r\n", 2),
        (b"id: 1\ndata: a\n\n", 2),
        (b": ping\n\n", 2),
        (b"data: a\r\n\n", 2),
        (b"data: a\n\r\n", 2),
        (b"\n\n", 2),
        # an event left open: the next feed's lines go to the line machine
        (b"data: a\n", 1),
        # the line machine's
        (b"data: a\ndata: b\n\n", 0),
        (b"retry: 1\ndata: a\n\n", 0),
        (b"data: a\rb\n\n", 0),
        (b"data: a\r\rb\r\n\r\n", 0),
        (b"data: a\nb\r\n\r\n", 0),
        (b"data: a\r\r", 0),
    ],
)
def test_what_the_fast_path_takes(block: bytes, taken: int) -> None:
    # After a first block (the BOM decided), each feed of ``block`` alone.
    chunks = [b"data: first\n\n", block, block]
    assert_same(chunks)
    assert feeds_taken_whole(chunks) == 1 + taken


@pytest.mark.parametrize(
    ("block", "limits", "taken"),
    [
        (b"data: 12345\n\n", {"max_line": 11}, True),  # the line is 11 bytes
        (b"data: 12345\n\n", {"max_line": 10}, False),
        (b"data: 12345\n\n", {"max_event": 5}, True),  # the data is 5 bytes
        (b"data: 12345\n\n", {"max_event": 4}, False),
        (b"event: e\ndata: 12345\n\n", {"max_event": 20}, True),  # the block, to its last LF
        (b"event: e\ndata: 12345\n\n", {"max_event": 5}, True),  # line by line
        (b"event: e\ndata: 12345\n\n", {"max_event": 4}, False),
        (b"data: 12345\r\n\r\n", {"max_line": 11}, True),
        (b"data: 12345\r\n\r\n", {"max_line": 10}, False),
    ],
)
def test_the_fast_path_within_the_limits(block: bytes, limits: dict[str, int], taken: bool) -> None:
    chunks = [b"data: 1\n\n", block, block]
    assert_same(chunks, **limits)
    assert feeds_taken_whole(chunks, **limits) == (3 if taken else 1)


def test_one_block_per_feed_keeps_the_id_and_the_offsets() -> None:
    chunks = [b"id: 7\ndata: a\n\n", b"event: e\ndata: b\n\n", b"data: c\r\n\r\n"]
    for fast in (True, False):
        decoder = SSEDecoder(fast=fast)
        frames = [frame for chunk in chunks for frame in decoder.feed(chunk)]
        assert frames == [
            ServerSentEvent("a", None, "7", None, 0, 0),
            ServerSentEvent("b", "e", "7", None, 15, 1),
            ServerSentEvent("c", None, "7", None, 33, 2),
        ]
        assert decoder.bytes_consumed == 44
    assert feeds_taken_whole(chunks) == 3


@pytest.mark.parametrize(
    ("before", "frames"),
    [
        # an open line: the next chunk ends it
        (b"data: a", [[], [ServerSentEvent("adata: b", None, None, None, 0, 0)]]),
        # an open event: the next chunk's data line is its second one
        (b"data: a\n", [[], [ServerSentEvent("a\nb", None, None, None, 0, 0)]]),
        # a CR waiting for its LF: none comes, the next chunk starts a block
        (
            b"data: a\n\r",
            [
                [ServerSentEvent("a", None, None, None, 0, 0)],
                [ServerSentEvent("b", None, None, None, 9, 1)],
            ],
        ),
        # an undecided BOM: the two bytes are not one, and start the first line
        (b"\xef\xbb", [[], []]),
    ],
)
def test_a_block_after_what_is_pending(before: bytes, frames: list[list[SSEFrame]]) -> None:
    chunks = [before, b"data: b\n\n", b"data: c\n\n"]
    assert_same(chunks)
    for fast in (True, False):
        decoder = SSEDecoder(fast=fast)
        assert [decoder.feed(chunk) for chunk in chunks[:2]] == frames
        last = events(decoder.feed(chunks[2]))
        assert [(f.data, f.offset) for f in last] == [("c", len(before) + 9)]


def test_feed_after_close() -> None:
    for fast in (True, False):
        decoder = SSEDecoder(fast=fast)
        decoder.close()
        with pytest.raises(ProtocolError, match="after close"):
            decoder.feed(b"data: a\n\n")


def test_the_reference_path_never_takes_the_fast_path() -> None:
    data = b"data: a\n\nevent: e\ndata: b\n\n: c\n\ndata: d\r\n\r\n"
    for fast in (True, False):
        decoder = _Counting(fast=fast)
        for chunk in (data, *per_block(data)):
            decoder.feed(chunk)
        if fast:
            assert decoder.scans > 0
            assert decoder.lines == 0
        else:
            assert decoder.scans == 0
            assert decoder.lines == 2 * 9  # every line, blank ones included, twice


def test_fixtures_one_block_per_feed() -> None:
    paths = sorted(FIXTURES.rglob("*.sse"))
    taken = feeds = 0
    for path in paths:
        data = path.read_bytes()
        for stream in (data, data.replace(b"\n", b"\r\n")):
            chunks = per_block(stream)
            assert_same(chunks)
            taken += feeds_taken_whole(chunks)
            feeds += len(chunks)
    assert taken > 0.95 * feeds


@settings(max_examples=400)
@given(data=block_streams())
def test_runs_of_blocks_one_block_per_feed(data: bytes) -> None:
    assert_same(per_block(data))


@settings(max_examples=200)
@given(data=block_streams(), max_line=st.integers(1, 12), max_event=st.integers(1, 12))
def test_one_block_per_feed_with_small_limits(data: bytes, max_line: int, max_event: int) -> None:
    assert_same(per_block(data), max_line=max_line, max_event=max_event)


@settings(max_examples=300)
@given(data=streams())
def test_any_stream_one_block_per_feed(data: bytes) -> None:
    assert_same(per_block(data))


# -- bytes searched -------------------------------------------------------------------------


class Counted(bytes):
    """Bytes that count how many bytes their ``find`` calls looked at."""

    scanned = 0

    def find(  # type: ignore[override]
        self, sub: bytes, start: SupportsIndex | None = None, end: SupportsIndex | None = None
    ) -> int:
        found = super().find(sub, start, end)
        first = 0 if start is None else int(start)
        last = len(self) if end is None else min(int(end), len(self))
        Counted.scanned += max(0, (found + len(sub) if found != -1 else last) - first)
        return found


def scanned(chunks: list[bytes]) -> int:
    decoder = SSEDecoder()
    decoder.feed(b"\n")  # decides the BOM: later chunks are searched as given
    Counted.scanned = 0
    for chunk in chunks:
        decoder.feed(Counted(chunk))
    return Counted.scanned


@pytest.mark.parametrize(
    "unit",
    [
        b"data: x\r",  # CR line ends only: no LF in the whole chunk
        b"data: x\r\r",
        b"retry: 1\ndata: x\n\n",  # every block falls back to the line machine
        b"data: a\ndata: b\n\n",
        b"event: e\rdata: x\n\n",
        b": c\n",
        b"x\n",
        b"event: e\n",
    ],
)
def test_bytes_searched_stay_linear(unit: bytes) -> None:
    # A CR or an LF far away must not be searched for again at every line.
    for tail in (b"", b"\r", b"\n", b"data: end\r\n\r\n"):
        data = unit * 5000 + tail
        assert scanned([data]) <= 6 * len(data), (unit, tail)
        pieces = [data[i : i + 4096] for i in range(0, len(data), 4096)]
        assert scanned(pieces) <= 6 * len(data), (unit, tail)
