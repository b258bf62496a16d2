"""Dialect detection (``dialect="auto"``): the rules, and the detector that reads a
stream arriving in pieces.

:class:`Detector` must give, after each piece, what :func:`detect` gives for the whole
input so far (the same answer or the same error), while reading each byte once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream import StreamDecoder, decode
from polystream.dialects import _detect
from polystream.dialects._detect import (
    MAX_DETECT_BYTES,
    Detector,
    detect,
    dialect_for_media_type,
)
from polystream.errors import RemoteProtocolError
from polystream.events import BlockStart, MediaInfo, StreamStart
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
        (
            b'data: {"type":"transcript.text.delta","delta":"Hi"}\n\n',
            ("openai_transcription", "sse"),
        ),
        (
            b'event: image_generation.partial_image\ndata: {"type":'
            b'"image_generation.partial_image","b64_json":""}\n\n',
            ("openai_images", "sse"),
        ),
        (b'data: {"type":"image_edit.completed"}\n\n', ("openai_images", "sse")),
        # Raw audio: the signature of an audio file (rule 0).
        (b"ID3\x04\x00\x00\x00\x00\x00\x00", ("openai_speech", "raw")),
        (b"\xff\xfb\x90\x64\x00", ("openai_speech", "raw")),
        (b"RIFF\x24\x08\x00\x00WAVEfmt ", ("openai_speech", "raw")),
        (b"fLaC\x00\x00\x00\x22", ("openai_speech", "raw")),
        (b"OggS\x00\x02", ("openai_speech", "raw")),
        (b"\xff\xf1\x50\x80", ("openai_speech", "raw")),
        (b"RIFF\x24\x08\x00\x00AVI ", None),  # not audio, not a stream: more input
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


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg"),
        (b"\xff\xf3\x48\xc4", "audio/mpeg"),
        (b"RIFF\x24\x08\x00\x00WAVEfmt ", "audio/wav"),
        (b"fLaC\x00\x00\x00\x22", "audio/flac"),
        (b"OggS\x00\x02", "audio/ogg"),
        (b"\xff\xf9\x50\x80", "audio/aac"),
    ],
)
def test_raw_audio_byte_by_byte(data: bytes, media_type: str) -> None:
    detector = Detector()
    answers = [detector.feed(data[i : i + 1]) for i in range(len(data))]
    found = answers.index(("openai_speech", "raw"))
    assert answers[:found] == [None] * found
    assert detector.media_type == media_type
    # Only at the start: after a blank byte it is not an audio file.
    assert Detector().feed(b" " + data) is None


def test_dialect_for_media_type() -> None:
    for media_type in (
        "audio/mpeg",
        "audio/pcm",
        "Audio/WAV; charset=binary",
        "audio/l16;rate=8000",
    ):
        assert dialect_for_media_type(media_type) == "openai_speech"
    for media_type in ("text/event-stream", "application/json", "audio", "", None, ";"):
        assert dialect_for_media_type(media_type) is None


@pytest.mark.parametrize(
    ("content_type", "media"),
    [
        ("audio/mpeg", {"mime_type": "audio/mpeg", "format": "mp3", "channels": 1}),
        (
            "audio/pcm",
            {"mime_type": "audio/pcm", "format": "pcm", "sample_rate": 24000, "channels": 1},
        ),
        ("audio/flac", {"mime_type": "audio/flac", "format": "flac", "channels": 1}),
        ("audio/opus", {"mime_type": "audio/opus", "format": "opus", "channels": 1}),
        ("audio/aac", {"mime_type": "audio/aac", "format": "aac", "channels": 1}),
        ("audio/wav", {"mime_type": "audio/wav", "format": "wav", "channels": 1}),
        ("audio/x-unknown", {"channels": 1}),
    ],
)
def test_an_audio_content_type_is_a_raw_speech_body(content_type: str, media: Any) -> None:
    body = bytes(range(7))  # no signature: the Content-Type alone decides
    decoder = StreamDecoder(content_type=content_type)
    assert decoder.dialect == "openai_speech"  # known before any byte
    events = decoder.feed(body) + decoder.close()
    assert events[1] == BlockStart(index=0, kind="audio", media=msgspec.convert(media, MediaInfo))
    audio = decoder.result().audio
    assert audio is not None and audio.data == body


def test_a_content_type_no_dialect_claims_leaves_detection_to_the_bytes() -> None:
    decoder = StreamDecoder(content_type="text/event-stream")
    assert decoder.dialect is None
    decoder.feed(_EVENT)
    assert decoder.dialect == "openai_chat"
    # Given to a dialect without a raw framing, it is not passed on.
    decoder = StreamDecoder("openai_chat", content_type="audio/mpeg")
    start = decoder.feed(_EVENT)[0]
    assert isinstance(start, StreamStart)
    assert (start.dialect, start.model) == ("openai_chat", "gpt-x")


def test_a_sniffed_audio_file_is_decoded_in_its_format() -> None:
    flac = b"fLaC\x00\x00\x00\x22" + bytes(40)
    result = decode(flac)
    assert result.dialect == "openai_speech"
    assert result.audio is not None
    assert (result.audio.format, result.audio.mime_type, result.audio.data) == (
        "flac",
        "audio/flac",
        flac,
    )
