"""openai_speech: exact events, strict and tolerant errors, the raw framing (chunking,
truncation against a length), the encoder's exact bytes and its losses."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polystream import decode, get_dialect
from polystream.dialects import detect
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    Event,
    Finish,
    MediaInfo,
    StreamStart,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.request.codecs import build_request, parse_request
from polystream.transcode import convert
from tests.helpers import FIXTURES, assert_chunking_invariant, feed_all, split_at

SPEECH = get_dialect("openai_speech")
HERE = FIXTURES / "openai_speech"


def _events(data: bytes, **options: object) -> list[Event]:
    decoder = SPEECH.decoder(**options)
    return decoder.feed(data) + decoder.close()


def _delta(audio: bytes) -> bytes:
    return b'data: {"type":"speech.audio.delta","audio":"%s"}\n\n' % base64.b64encode(audio)


DONE = (
    b'data: {"type":"speech.audio.done","usage":'
    b'{"input_tokens":3,"output_tokens":7,"total_tokens":10}}\n\n'
)


def test_exact_events_with_the_request_format() -> None:
    events = _events(_delta(b"\x01\x02") + DONE, audio_format="pcm")
    usage = Usage(
        input_tokens=3,
        output_tokens=7,
        total_tokens=10,
        raw={"input_tokens": 3, "output_tokens": 7, "total_tokens": 10},
    )
    assert events == [
        StreamStart(dialect="openai_speech"),
        BlockStart(
            index=0,
            kind="audio",
            media=MediaInfo(format="pcm", mime_type="audio/pcm", sample_rate=24000, channels=1),
        ),
        DataDelta(index=0, delta="AQI="),
        UsageUpdate(usage=usage),
        BlockEnd(index=0),
        Finish(status="completed", reason=events[-1].reason, usage=usage),
    ]
    assert events[-1].reason.unified == "stop"


def test_format_unknown_without_the_request_and_from_a_content_type() -> None:
    assert _events(DONE)[1] == BlockStart(index=0, kind="audio", media=MediaInfo(channels=1))
    media = _events(b"x", framing="raw", content_type="audio/mpeg; charset=x")[1].media
    assert media == MediaInfo(format="mp3", mime_type="audio/mpeg", channels=1)


def test_unknown_audio_format_option_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="unknown audio_format 'ogg'"):
        SPEECH.decoder(audio_format="ogg")
    with pytest.raises(LocalProtocolError, match="raw_chunk_size"):
        SPEECH.decoder(raw_chunk_size=1000)


def test_error_event_then_failed_finish() -> None:
    events = _events((HERE / "error.sse").read_bytes())
    error, finish = events[-2], events[-1]
    assert isinstance(error, ErrorEvent) and isinstance(finish, Finish)
    assert (error.error.kind, error.error.code, error.error.retryable) == (
        "server",
        "server_error",
        True,
    )
    assert finish.status == "failed" and finish.error == error.error


def test_a_bare_error_object_is_an_error_too() -> None:
    events = _events(b'data: {"error":{"message":"slow down","code":"rate_limit_exceeded"}}\n\n')
    assert [type(e) for e in events] == [StreamStart, ErrorEvent, Finish]
    assert events[1].error.kind == "rate_limit"  # type: ignore[union-attr]
    assert events[1].error.message == "slow down"  # type: ignore[union-attr]


def test_no_done_is_truncated() -> None:
    events = _events(_delta(b"abc"))
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"
    assert events[-1].error is not None and events[-1].error.kind == "truncated"
    assert not any(isinstance(e, BlockEnd) for e in events)


def test_unknown_event_tolerant_and_strict() -> None:
    data = _delta(b"a") + b'data: {"type":"speech.audio.progress","t":1}\n\n' + DONE
    unknown = [e for e in _events(data) if isinstance(e, Unknown)]
    assert unknown == [
        Unknown(name="speech.audio.progress", data='{"type":"speech.audio.progress","t":1}')
    ]
    with pytest.raises(RemoteProtocolError) as caught:
        _events(data, strict=True)
    assert caught.value.dialect == "openai_speech"
    assert caught.value.event_index == 1
    assert caught.value.byte_offset == len(_delta(b"a"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'data: {"type":"speech.audio.delta","audio":5}\n\n', "without a string audio"),
        (b'data: {"type":"speech.audio.done","usage":{"input_tokens":-1}}\n\n', "input_tokens"),
        (b'data: {"type":"speech.audio.done","usage":[]}\n\n', "usage is not an object"),
        (b"data: [1]\n\n", "not a JSON object"),
        (b"data: {nope\n\n", "malformed JSON"),
        (b'data: {"type":7}\n\n', "type is not a string"),
    ],
)
def test_malformed_events(data: bytes, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message) as caught:
        _events(data, strict=True)
    assert (caught.value.event_index, caught.value.byte_offset) == (0, 0)
    events = _events(data)  # tolerant: an error event, and the stream goes on to its end
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].error.kind == "protocol"
    assert message in errors[0].error.message
    assert isinstance(events[-1], Finish) and events[-1].status == "truncated"


def test_event_lines_and_odd_fields_round_trip_exactly() -> None:
    data = (
        b'event: speech.audio.delta\ndata: {"audio":"AAA=","type":"speech.audio.delta"}\n\n'
        b'data: {"type":"speech.audio.delta","audio":"AQ==","seq":1}\n\n'
        b'event: speech.audio.delta\ndata: {"audio":"Ag=="}\n\n'
        + b'data: {"type":"speech.audio.done","usage":{"input_tokens":1,"output_tokens":2,'
        b'"total_tokens":3,"x":0},"id":"s1"}\n\n'
    )
    events = _events(data)
    assert SPEECH.encoder().encode_all(events) == data


@pytest.mark.parametrize("path", sorted(HERE.glob("*.sse")), ids=lambda p: p.name)
def test_fixture_round_trip_is_byte_exact(path: Path) -> None:
    data = path.read_bytes()
    encoded = SPEECH.encoder().encode_all(_events(data))
    if path.name == "truncated.sse":
        # (The cut-off half event is not an event: everything before it comes back.)
        assert data.startswith(encoded) and encoded.endswith(b"\n\n")
    else:
        # (A comment is written without the blank line after it, which dispatches nothing.)
        assert encoded == data.replace(b": keep-alive\n\n", b": keep-alive\n")


# -- the raw framing ----------------------------------------------------------------------

AUDIO = bytes(range(256)) * 30  # 7,680 bytes: two whole 3,072-byte deltas and a rest


def test_raw_exact_events() -> None:
    events = _events(AUDIO, framing="raw", audio_format="mp3")
    assert events[:2] == [
        StreamStart(dialect="openai_speech"),
        BlockStart(
            index=0, kind="audio", media=MediaInfo(format="mp3", mime_type="audio/mpeg", channels=1)
        ),
    ]
    deltas = [e for e in events if isinstance(e, DataDelta)]
    assert [len(base64.b64decode(d.delta)) for d in deltas] == [3072, 3072, 1536]
    assert b"".join(base64.b64decode(d.delta) for d in deltas) == AUDIO
    # Whole deltas have no padding: their texts join into the base64 of the whole.
    assert "".join(d.delta for d in deltas) == base64.b64encode(AUDIO).decode()
    assert events[-2:] == [BlockEnd(index=0), Finish(status="completed", reason=events[-1].reason)]
    assert decode(AUDIO, "openai_speech", framing="raw").status == "completed"


def test_raw_chunking_invariant() -> None:
    assert_chunking_invariant(lambda: SPEECH.decoder(framing="raw"), AUDIO[:2000], seeds=10)


@given(cuts=st.lists(st.integers(min_value=0), max_size=16))
def test_raw_random_splits(cuts: list[int]) -> None:
    def make() -> object:
        return SPEECH.decoder(framing="raw", raw_chunk_size=999)

    whole = feed_all(make, [AUDIO])  # type: ignore[arg-type]
    assert feed_all(make, split_at(AUDIO, cuts)) == whole  # type: ignore[arg-type]


def test_raw_round_trip_and_rebuild() -> None:
    events = _events(AUDIO, framing="raw", audio_format="wav")
    assert SPEECH.encoder(framing="raw").encode_all(events) == AUDIO
    assert SPEECH.rebuild(events) == {
        "audio": base64.b64encode(AUDIO).decode(),
        "format": "wav",
        "usage": None,
    }


def test_raw_truncation_only_against_an_expected_length() -> None:
    assert _events(AUDIO[:100], framing="raw")[-1].status == "completed"  # type: ignore[union-attr]
    events = _events(AUDIO[:100], framing="raw", expected_length=len(AUDIO))
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.error is not None and finish.error.byte_offset == 100
    assert "ended after 100 of its 7680 bytes" in finish.error.message
    assert not any(isinstance(e, BlockEnd) for e in events)
    exact = _events(AUDIO, framing="raw", expected_length=len(AUDIO))
    assert exact[-1].status == "completed"  # type: ignore[union-attr]
    decoder = SPEECH.decoder(framing="raw", expected_length=10)
    with pytest.raises(RemoteProtocolError, match="longer than its expected_length") as caught:
        decoder.feed(b"x" * 11)
        decoder.close()
    assert caught.value.byte_offset == 10


def test_raw_empty_body() -> None:
    events = _events(b"", framing="raw")
    assert [type(e) for e in events] == [StreamStart, BlockStart, BlockEnd, Finish]


# -- the encoder and rebuild ----------------------------------------------------------------


def test_sse_to_raw_writes_the_audio_and_loses_the_usage() -> None:
    data = (HERE / "audio.sse").read_bytes()
    events = _events(data)
    encoder = SPEECH.encoder(framing="raw")
    audio = encoder.encode_all(events)
    assert audio == base64.b64decode(SPEECH.rebuild(events)["audio"])
    assert len(audio) == 4 * 80
    assert [loss.what for loss in encoder.losses] == ["usage"]


def test_rebuild_of_the_fixture() -> None:
    events = _events((HERE / "audio.sse").read_bytes(), audio_format="pcm")
    rebuilt = SPEECH.rebuild(events)
    assert rebuilt["format"] == "pcm"
    assert rebuilt["usage"] == {"input_tokens": 14, "output_tokens": 101, "total_tokens": 115}
    assert len(base64.b64decode(rebuilt["audio"])) == 320


def test_text_into_speech_reports_every_loss() -> None:
    chat = FIXTURES / "openai_chat" / "reply_ok.sse"
    data, losses = convert(chat.read_bytes(), "openai_speech", source="openai_chat")
    whats = [loss.what for loss in losses]
    assert "block:text" in whats and "id" in whats and "model" in whats
    assert all(not loss.carried for loss in losses)
    # Nothing but the terminal event (with the usage) is written.
    frames = [json.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: ")]
    assert [f["type"] for f in frames] == ["speech.audio.done"]
    assert decode(data, "openai_speech").status == "completed"


def test_tool_calls_into_speech_report_the_block_and_the_reason() -> None:
    chat = FIXTURES / "openai_chat" / "parallel_tool_calls.sse"
    _, losses = convert(chat.read_bytes(), "openai_speech", source="openai_chat")
    whats = [loss.what for loss in losses]
    assert whats.count("block:tool_call") == 2
    assert "finish_reason" in whats


def test_speech_into_text_reports_the_audio() -> None:
    data = (HERE / "audio.sse").read_bytes()
    _, losses = convert(data, "openai_chat", source="openai_speech")
    assert any("audio" in loss.what or "data" in loss.what for loss in losses)


def test_a_failed_foreign_stream_writes_an_error_event() -> None:
    encoder = SPEECH.encoder()
    failed = _events((HERE / "error.sse").read_bytes())[-1]
    written = encoder.encode(failed)
    assert written.startswith(b'data: {"type":"error","error":{')
    assert _events(written)[-1].status == "failed"  # type: ignore[union-attr]


def test_unknown_framing_refused() -> None:
    with pytest.raises(LocalProtocolError, match="no json_array framing"):
        SPEECH.encoder(framing="json_array")


# -- detection and the request codec -----------------------------------------------------------


def test_detected_by_its_events() -> None:
    for path in sorted(HERE.glob("*.sse")):
        if path.name != "error.sse":
            assert detect(path.read_bytes()) == ("openai_speech", "sse")
    assert detect(b'data: {"type":"speech.audio.done","usage":{}}\n\n') == ("openai_speech", "sse")


def test_request_round_trip() -> None:
    body = {
        "input": "Hello there.",
        "model": "gpt-4o-mini-tts",
        "voice": "coral",
        "instructions": "Speak cheerfully.",
        "response_format": "pcm",
        "speed": 1.25,
        "stream_format": "sse",
    }
    request = parse_request("openai_speech", body)
    assert request.model == "gpt-4o-mini-tts" and request.stream
    assert request.last_user_text() == "Hello there."
    assert request.extra == {k: body[k] for k in list(body)[2:]}
    built = build_request("openai_speech", request)
    assert built.path == "/audio/speech"
    assert json.dumps(built.body) == json.dumps(body)
    raw_body = {"model": "tts-1", "input": "x", "voice": {"id": "voice_1"}}
    again = build_request("openai_speech", parse_request("openai_speech", raw_body))
    assert again.body == {"input": "x", "model": "tts-1", "voice": {"id": "voice_1"}}
    audio = {**raw_body, "stream_format": "audio"}
    assert not parse_request("openai_speech", audio).stream
    assert build_request("openai_speech", parse_request("openai_speech", audio)).body == {
        "input": "x",
        "model": "tts-1",
        "voice": {"id": "voice_1"},
        "stream_format": "audio",
    }
