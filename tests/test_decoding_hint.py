"""A dialect given by name that recognises nothing in the stream says what the stream
looks like: its protocol errors (raised or emitted) and its Finish name the dialect that
detection finds in the first bytes, and a ``dialect_mismatch`` warning comes before
the Finish. A stream the dialect recognises is never touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from polystream import StreamDecoder, decode
from polystream.decoding import HINT_BYTES, decode_events
from polystream.errors import RemoteProtocolError
from polystream.events import ErrorEvent, ErrorInfo, Finish, FinishReason, StreamWarning

from .helpers import fixture_dialect, stream_fixtures

FIXTURES = Path(__file__).parent / "fixtures"
SPEECH = (FIXTURES / "openai_speech" / "audio.sse").read_bytes()
CHAT = (FIXTURES / "openai_chat" / "reply_ok.sse").read_bytes()
TRUNCATED = FinishReason(unified="error")


def _warning(forced: str, looks: str) -> StreamWarning:
    return StreamWarning(
        code="dialect_mismatch",
        message=(
            f"nothing in the stream was recognised as {forced}: the stream looks like "
            f"{looks} (decode it as {looks}, or auto)"
        ),
    )


def test_a_speech_stream_decoded_as_responses() -> None:
    decoder = StreamDecoder("openai_responses")
    events = decoder.feed(SPEECH) + decoder.close()
    assert decoder.looks_like == "openai_speech"
    assert events[-2:] == [
        _warning("openai_responses", "openai_speech"),
        Finish(
            status="truncated",
            reason=TRUNCATED,
            error=ErrorInfo(
                kind="truncated",
                message=(
                    "stream ended without the openai_responses terminal event "
                    "(the stream looks like openai_speech)"
                ),
                retryable=True,
                dialect="openai_responses",
                event_index=4,
            ),
        ),
    ]
    result = decoder.result()
    assert result.error is not None
    assert result.error.message.endswith("(the stream looks like openai_speech)")
    assert [w.code for w in result.warnings] == ["dialect_mismatch"]
    assert result.unknown == 5


def test_a_speech_stream_decoded_as_responses_in_strict_mode() -> None:
    decoder = StreamDecoder("openai_responses", strict=True)
    with pytest.raises(RemoteProtocolError) as info:
        decoder.feed(SPEECH)
    assert type(info.value) is RemoteProtocolError
    assert str(info.value) == (
        "unknown event 'speech.audio.delta' (the stream looks like openai_speech) "
        "(dialect openai_responses, event 0, byte 0)"
    )
    assert (info.value.dialect, info.value.event_index, info.value.byte_offset) == (
        "openai_responses",
        0,
        0,
    )
    # The end: a cut stream, which says it too.
    warning, finish = decoder.close()
    assert warning == _warning("openai_responses", "openai_speech")
    assert isinstance(finish, Finish) and finish.error is not None
    assert finish.error.message == (
        "stream ended without the openai_responses terminal event "
        "(the stream looks like openai_speech)"
    )


def test_a_chat_stream_decoded_as_speech() -> None:
    events = decode_events(CHAT, "openai_speech")
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors == [
        ErrorEvent(
            error=ErrorInfo(
                kind="protocol",
                message=(
                    "malformed JSON payload: JSON is malformed: invalid character (byte 1) "
                    "(the stream looks like openai_chat)"
                ),
                dialect="openai_speech",
                event_index=5,
                byte_offset=1735,
            )
        )
    ]
    assert events[-2] == _warning("openai_speech", "openai_chat")
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.error is not None
    assert finish.error.message == (
        "stream ended without the openai_speech terminal event (the stream looks like openai_chat)"
    )
    with pytest.raises(RemoteProtocolError) as info:
        decode_events(CHAT, "openai_speech", strict=True)
    assert str(info.value) == (
        "unknown event None (the stream looks like openai_chat) (dialect openai_speech, event 0, "
        "byte 0)"
    )


def test_the_same_whatever_the_chunking() -> None:
    whole = decode_events(SPEECH, "openai_responses")
    decoder = StreamDecoder("openai_responses")
    pieces = []
    for i in range(len(SPEECH)):
        pieces += decoder.feed(SPEECH[i : i + 1])
    assert pieces + decoder.close() == whole


def test_raw_audio_decoded_as_chat() -> None:
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(64))
    decoder = StreamDecoder("openai_chat")
    events = decoder.feed(mp3) + decoder.close()
    assert decoder.looks_like == "openai_speech"
    assert events[0] == _warning("openai_chat", "openai_speech")
    finish = events[1]
    assert isinstance(finish, Finish) and finish.error is not None
    assert finish.error.message.endswith("(the stream looks like openai_speech)")
    assert decode_events(mp3, "openai_chat", strict=True) == events


def test_a_json_array_stream_decoded_as_chat() -> None:
    # Read as SSE, a JSON array is one unterminated line: a cut stream.
    array = (FIXTURES / "gemini_generate" / "skeleton.jsonarray").read_bytes()
    decoder = StreamDecoder("openai_chat", strict=True)
    decoder.feed(array)
    events = decoder.close()
    assert decoder.looks_like == "gemini_generate"
    assert events[0] == _warning("openai_chat", "gemini_generate")


@pytest.mark.parametrize("path", stream_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_stream_in_its_own_dialect_is_never_said_to_look_like_another(path: Path) -> None:
    decoder = StreamDecoder(fixture_dialect(path))
    events = decoder.feed(path.read_bytes()) + decoder.close()
    assert decoder.looks_like is None
    assert not any(isinstance(e, StreamWarning) and e.code == "dialect_mismatch" for e in events)


def test_nothing_is_said_once_the_dialect_recognised_something() -> None:
    # A chat stream cut by garbage after its first chunk: the error is the chat decoder's.
    first = CHAT.split(b"\n\n")[0] + b"\n\n"
    broken = first + b'data: {"type":"speech.audio.delta","audio":""}\n\n'
    with pytest.raises(RemoteProtocolError) as info:
        decode_events(broken, "openai_chat", strict=True)
    assert "looks like" not in str(info.value)
    result = decode(broken, "openai_chat")
    assert result.status == "truncated" and result.warnings == []


def test_nothing_is_said_when_detection_places_the_stream_nowhere() -> None:
    decoder = StreamDecoder("openai_chat")
    events = decoder.feed(b"data: 1\n\n") + decoder.close()
    assert decoder.looks_like is None
    assert not any(isinstance(e, StreamWarning) for e in events)


def test_only_the_first_hint_bytes_are_read() -> None:
    comments = b": " + b"x" * 1020 + b"\n\n"
    padding = comments * (HINT_BYTES // len(comments) + 1)
    decoder = StreamDecoder("openai_responses")
    events = decoder.feed(padding + SPEECH) + decoder.close()
    assert decoder.looks_like is None
    assert not any(isinstance(e, StreamWarning) for e in events)
    # Within them, it is found, however they were cut.
    data = padding[: HINT_BYTES - len(SPEECH)] + SPEECH
    for step in (len(data), 1024, 1000):
        decoder = StreamDecoder("openai_responses")
        for start in range(0, len(data), step):
            decoder.feed(data[start : start + step])
        decoder.close()
        assert decoder.looks_like == "openai_speech", step
