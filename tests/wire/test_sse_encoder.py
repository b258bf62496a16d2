"""SSEEncoder: the exact inverse of SSEDecoder. A table of (frames, bytes) cases run in
both directions, the refusals, and a hypothesis round trip over arbitrary text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polystream.errors import LocalProtocolError
from polystream.wire.sse import ServerSentEvent, SSEComment, SSEDecoder, SSEEncoder
from tests.helpers import assert_chunking_invariant, feed_all, split_at


def decoded(data: bytes, *, bytewise: bool = True) -> list[tuple[Any, ...]]:
    """Decode a whole stream into comparable tuples (no offsets)."""
    out: list[tuple[Any, ...]] = []
    if bytewise:
        frames = assert_chunking_invariant(SSEDecoder, data, seeds=3)
    else:
        frames = feed_all(SSEDecoder, [data])
        assert feed_all(SSEDecoder, split_at(data, [len(data) // 3, len(data) // 2])) == frames
    for frame in frames:
        if isinstance(frame, SSEComment):
            out.append(("comment", frame.text))
        else:
            assert isinstance(frame, ServerSentEvent)
            out.append((frame.data, frame.event, frame.id, frame.retry))
    return out


# (what to encode, the exact bytes, what decoding the bytes gives back)
# The encode side is ("event", data, kwargs) or ("comment", text).
TABLE: list[tuple[tuple[Any, ...], bytes, list[tuple[Any, ...]]]] = [
    (("event", "hello", {}), b"data: hello\n\n", [("hello", None, None, None)]),
    (("event", "", {}), b"data: \n\n", [("", None, None, None)]),
    (("event", " lead", {}), b"data:  lead\n\n", [(" lead", None, None, None)]),
    (("event", "a\nb", {}), b"data: a\ndata: b\n\n", [("a\nb", None, None, None)]),
    (("event", "a\n", {}), b"data: a\ndata: \n\n", [("a\n", None, None, None)]),
    (("event", "\n", {}), b"data: \ndata: \n\n", [("\n", None, None, None)]),
    (("event", "\n\n", {}), b"data: \ndata: \ndata: \n\n", [("\n\n", None, None, None)]),
    # CR and CRLF inside data also start a new data: line; they come back as LF
    # (an SSE stream cannot tell the three line ends apart).
    (("event", "a\r\nb", {}), b"data: a\ndata: b\n\n", [("a\nb", None, None, None)]),
    (("event", "a\rb\r", {}), b"data: a\ndata: b\ndata: \n\n", [("a\nb\n", None, None, None)]),
    (("event", "a\r\n\r\nb", {}), b"data: a\ndata: \ndata: b\n\n", [("a\n\nb", None, None, None)]),
    # Other Unicode line breaks are data.
    (
        ("event", "a\u2028b\x85c", {}),
        "data: a\u2028b\x85c\n\n".encode(),
        [("a\u2028b\x85c", None, None, None)],
    ),
    (
        ("event", ": not a comment", {}),
        b"data: : not a comment\n\n",
        [(": not a comment", None, None, None)],
    ),
    (
        ("event", '{"type":"ping"}', {"event": "ping"}),
        b'event: ping\ndata: {"type":"ping"}\n\n',
        [('{"type":"ping"}', "ping", None, None)],
    ),
    (
        ("event", "x", {"event": "a b:c"}),
        b"event: a b:c\ndata: x\n\n",
        [("x", "a b:c", None, None)],
    ),
    # An empty event name is the default type: it decodes as None.
    (("event", "x", {"event": ""}), b"event: \ndata: x\n\n", [("x", None, None, None)]),
    (("event", "x", {"id": "7"}), b"id: 7\ndata: x\n\n", [("x", None, "7", None)]),
    (("event", "x", {"id": ""}), b"id: \ndata: x\n\n", [("x", None, "", None)]),
    (("event", "x", {"id": " s"}), b"id:  s\ndata: x\n\n", [("x", None, " s", None)]),
    (("event", "x", {"retry": 1000}), b"retry: 1000\ndata: x\n\n", [("x", None, None, 1000)]),
    (("event", "x", {"retry": 0}), b"retry: 0\ndata: x\n\n", [("x", None, None, 0)]),
    (
        ("event", "é😀", {"event": "e", "id": "1", "retry": 5}),
        "event: e\nid: 1\nretry: 5\ndata: é😀\n\n".encode(),
        [("é😀", "e", "1", 5)],
    ),
    (("comment", "ping"), b": ping\n", [("comment", "ping")]),
    (("comment", ""), b":\n", [("comment", "")]),
    (("comment", " two"), b":  two\n", [("comment", " two")]),
    (
        ("comment", "OPENROUTER PROCESSING"),
        b": OPENROUTER PROCESSING\n",
        [("comment", "OPENROUTER PROCESSING")],
    ),
    (
        ("comment", "a\nb\r\nc"),
        b": a\n: b\n: c\n",
        [("comment", "a"), ("comment", "b"), ("comment", "c")],
    ),
]


def encode(what: tuple[Any, ...]) -> bytes:
    encoder = SSEEncoder()
    if what[0] == "comment":
        return encoder.comment(what[1])
    return encoder.event(what[1], **what[2])


@pytest.mark.parametrize(("what", "wire", "back"), TABLE, ids=[repr(t[0]) for t in TABLE])
def test_encode_then_decode(
    what: tuple[Any, ...], wire: bytes, back: list[tuple[Any, ...]]
) -> None:
    assert encode(what) == wire
    assert decoded(wire) == back


def test_comment_default_is_an_empty_comment() -> None:
    assert SSEEncoder().comment() == b":\n"


def test_a_stream_of_events_round_trips_with_id_persistence() -> None:
    encoder = SSEEncoder()
    wire = b"".join(
        [
            encoder.comment("ping"),
            encoder.event('{"a":1}', event="message_start", id="1"),
            encoder.event("two\nlines"),
            encoder.event("x", id=""),
            encoder.comment("OPENROUTER PROCESSING"),
            encoder.event("y", retry=3),
        ]
    )
    assert decoded(wire) == [
        ("comment", "ping"),
        ('{"a":1}', "message_start", "1", None),
        ("two\nlines", None, "1", None),  # the last event ID persists
        ("x", None, "", None),
        ("comment", "OPENROUTER PROCESSING"),
        ("y", None, "", 3),
    ]


@pytest.mark.parametrize("name", ["a\nb", "a\rb", "a\r\nb", "\n", "x\r"])
def test_cr_or_lf_in_event_name_is_refused(name: str) -> None:
    with pytest.raises(LocalProtocolError):
        SSEEncoder().event("x", event=name)


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "\r\n", "a\x00b", "\x00"])
def test_cr_lf_or_nul_in_id_is_refused(value: str) -> None:
    with pytest.raises(LocalProtocolError):
        SSEEncoder().event("x", id=value)


def test_negative_retry_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        SSEEncoder().event("x", retry=-1)


def test_nul_in_data_and_event_is_carried() -> None:
    wire = SSEEncoder().event("a\x00b", event="e\x00")
    assert decoded(wire) == [("a\x00b", "e\x00", None, None)]


# -- property: decode(encode(x)) == x -----------------------------------------------------

_ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\r\n \x00:é😀\u2028\x85")),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=20,
)
_EVENT = st.one_of(st.none(), _ANY_TEXT.filter(lambda s: "\r" not in s and "\n" not in s))
_ID = st.one_of(st.none(), _ANY_TEXT.filter(lambda s: not any(c in s for c in "\r\n\x00")))
_RETRY = st.one_of(st.none(), st.integers(min_value=0, max_value=10**12))
_FRAME = st.one_of(
    st.tuples(st.just("event"), _ANY_TEXT, _EVENT, _ID, _RETRY),
    st.tuples(st.just("comment"), _ANY_TEXT),
)


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@given(frames=st.lists(_FRAME, max_size=8))
def test_round_trip_property(frames: list[tuple[Any, ...]]) -> None:
    encoder = SSEEncoder()
    wire = b""
    expected: list[tuple[Any, ...]] = []
    last_id: str | None = None
    for frame in frames:
        if frame[0] == "comment":
            wire += encoder.comment(frame[1])
            expected += [("comment", line) for line in _lines(frame[1])]
            continue
        _, data, event, id_, retry = frame
        wire += encoder.event(data, event=event, id=id_, retry=retry)
        if id_ is not None:
            last_id = id_
        # SSE normalises line ends inside data to LF, and "" names the default type.
        expected.append(("\n".join(_lines(data)), event or None, last_id, retry))
    assert decoded(wire, bytewise=False) == expected


@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.event("a\ud800b"),
        lambda e: e.event("x", event="\udfff"),
        lambda e: e.event("x", id="\ud800"),
        lambda e: e.comment("\ud800"),
    ],
)
def test_lone_surrogate_is_a_local_error(call: Any) -> None:
    with pytest.raises(LocalProtocolError):
        call(SSEEncoder())
