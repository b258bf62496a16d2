"""Dialect detection (``dialect="auto"``): the rules, and the detector that reads a
stream arriving in pieces.

:class:`Detector` must give, after each piece, what :func:`detect` gives for the whole
input so far (the same answer or the same error), while reading each byte once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder
from polystream.dialects import _detect
from polystream.dialects._detect import MAX_DETECT_BYTES, Detector, detect
from polystream.errors import RemoteProtocolError
from polystream.wire.sse import SSEDecoder

from .helpers import fixture_dialect, split_at, stream_fixtures

FIXTURES = stream_fixtures()
IDS = [str(p.relative_to(p.parents[1])) for p in FIXTURES]

_EVENT = b'data: {"object":"chat.completion.chunk","model":"gpt-x","choices":[]}\n\n'


def _answer(call: Any) -> Any:
    try:
        return ("found", call())
    except RemoteProtocolError as exc:
        return ("error", str(exc), exc.byte_offset)


def _steps(data: bytes, cuts: list[int]) -> tuple[list[Any], list[Any]]:
    """The detector's answer after each piece, and detect()'s on each prefix."""
    detector = Detector()
    got: list[Any] = []
    want: list[Any] = []
    seen = b""
    for piece in split_at(data, cuts):
        seen += piece
        got.append(_answer(lambda piece=piece: detector.feed(piece)))
        want.append(_answer(lambda seen=seen: detect(seen)))
    return got, want


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"[{", ("gemini_generate", "json_array")),
        (b"\xef\xbb\xbf \r\n[", ("gemini_generate", "json_array")),
        (b"event: message_start\ndata: {}\n\n", ("anthropic_messages", "sse")),
        (b": hi\n\ndata: [DONE]\n\n" + _EVENT, ("openai_chat", "sse")),
        (b'data: {"candidates": []}\r\n\r\n', ("gemini_generate", "sse")),
        (b'data: {"type":"speech.audio.delta","audio":""}\n\n', ("openai_speech", "sse")),
        (b"event: speech.audio.done\ndata: {}\n\n", ("openai_speech", "sse")),
        (b'data: {"type":"speech.audio.later"}\n\n', ("openai_speech", "sse")),
        (
            b'event: session.status_running\ndata: {"type":"session.status_running"}\n\n',
            ("anthropic_agent_session", "sse"),
        ),
        (
            b'event: user.message\ndata: {"type":"user.message","content":[]}\n\n',
            ("anthropic_agent_session", "sse"),
        ),
        (
            b'event: event_start\ndata: {"type":"event_start","event":{}}\n\n',
            ("anthropic_agent_session", "sse"),
        ),
        (
            b': connected\n\ndata: {"type":"agent.session.created","event_id":"e"}\n\n',
            ("openai_agent_session", "sse"),
        ),
        (b'data: {"type":"agent.session.turn.item.added"}\n\n', ("openai_agent_session", "sse")),
        (b'data: {"type":"response.created","response":{}}\n\n', ("openai_responses", "sse")),
        (b"  \n", None),
        (b"data: {", None),
    ],
)
def test_the_rules(data: bytes, expected: Any) -> None:
    assert detect(data) == expected
    assert _steps(data, list(range(1, len(data))))[0][-1] == ("found", expected)


def test_what_cannot_be_detected() -> None:
    with pytest.raises(RemoteProtocolError, match="single JSON document") as info:
        detect(b' \n {"id": 1}')
    assert info.value.byte_offset == 3
    # Nothing recognised in the first MAX_DETECT_BYTES: blank bytes, or SSE events no
    # rule names.
    for filler in (b" \r\n", b"data: 1\n\n"):
        data = filler * (MAX_DETECT_BYTES // len(filler) + 1)
        with pytest.raises(RemoteProtocolError, match="could not detect"):
            detect(data)
        assert detect(data[: MAX_DETECT_BYTES - 10]) is None


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_every_fixture_byte_by_byte_and_in_pieces(path: Path) -> None:
    data = path.read_bytes()[:3000]
    for cuts in (list(range(1, len(data))), list(range(7, len(data), 97))):
        got, want = _steps(data, cuts)
        assert got == want
    found = detect(path.read_bytes())
    assert found is not None and found[0] == fixture_dialect(path)


@settings(max_examples=200, deadline=None)
@given(
    head=st.lists(
        st.sampled_from([b" ", b"\r\n", b"\xef\xbb\xbf", b": c\n\n", b"data: [DONE]\n\n", b"\n"]),
        max_size=8,
    ),
    tail=st.sampled_from(
        [_EVENT, b"[", b'{"a": 1}', b"event: ping\ndata: {}\n\n", b"data: x\n\n", b"", b"\r"]
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=12),
)
def test_any_split_gives_the_answer_of_the_whole(
    head: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    data = b"".join(head) + tail
    got, want = _steps(data, cuts)
    assert got == want


def test_past_the_limit_in_pieces() -> None:
    # The error comes with the piece that reaches MAX_DETECT_BYTES, and again after.
    for filler in (b" \r\n", b"data: 1\n\n"):
        data = filler * (MAX_DETECT_BYTES // len(filler) + 100)
        cuts = list(range(65536, len(data), 65536))
        got, want = _steps(data, cuts)
        assert got == want
        limit = next(i for i, answer in enumerate(got) if answer[0] == "error")
        assert got[:limit] == [("found", None)] * limit  # (more input needed)
        assert (limit + 1) * 65536 >= MAX_DETECT_BYTES > limit * 65536
        assert got[limit:] == [got[limit]] * (len(got) - limit)


def test_each_byte_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # 200 comment blocks of 1 KiB, fed one by one, then an event: the detector's SSE
    # parser reads every byte once (reading the prefix again on each piece made this
    # quadratic: 512 KiB in 1 KiB pieces took 15 s), and the decoder keeps the pieces
    # without joining them until the dialect is known.
    fed: list[int] = []

    class Counting(SSEDecoder):
        def feed(self, data: Any) -> Any:
            fed.append(len(data))
            return super().feed(data)

    monkeypatch.setattr(_detect, "SSEDecoder", Counting)  # (the detector's parser only)
    comment = b": " + b"x" * 1020 + b"\n\n"
    decoder = StreamDecoder()
    for _ in range(200):
        assert decoder.feed(comment) == []
    assert len(decoder._prefix) == 200
    assert sum(fed) == 200 * len(comment)
    events = decoder.feed(_EVENT)
    assert decoder.dialect == "openai_chat"
    assert sum(fed) == 200 * len(comment) + len(_EVENT)
    assert decoder._prefix == [] and events
