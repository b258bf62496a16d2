"""``openai_transcription``: exact events, bad input in strict and tolerant mode, the
encoder's losses from another dialect, ``rebuild`` and the form codec."""

from __future__ import annotations

import pytest

from polystream import get_dialect
from polystream.dialects._detect import detect
from polystream.dialects.openai_transcription import rebuild
from polystream.errors import RemoteProtocolError, RequestError
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    StreamStart,
    TextDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.request.codecs import build_request, parse_request
from tests.helpers import FIXTURES

DIALECT = "openai_transcription"


def _decode(data: bytes, **options: object) -> list[object]:
    decoder = get_dialect(DIALECT).decoder(**options)
    return decoder.feed(data) + decoder.close()


def test_a_diarized_stream_gives_segments_and_the_diarized_object() -> None:
    data = (
        b'data: {"type":"transcript.text.delta","delta":"Hi.","segment_id":"seg_0"}\n\n'
        b'data: {"type":"transcript.text.segment","id":"seg_0","start":0.0,"end":0.8,'
        b'"speaker":"A","text":"Hi."}\n\n'
        b'data: {"type":"transcript.text.done","text":"Hi.","usage":{"type":"tokens",'
        b'"input_tokens":5,"output_tokens":2,"total_tokens":7}}\n\n'
    )
    events = _decode(data)
    usage = Usage(
        input_tokens=5,
        output_tokens=2,
        total_tokens=7,
        raw={"type": "tokens", "input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    )
    assert events == [
        StreamStart(dialect=DIALECT),
        BlockStart(index=0, kind="transcript"),
        TextDelta(index=0, delta="Hi.", extra={"segment_id": "seg_0"}),
        TranscriptSegment(index=0, text="Hi.", id="seg_0", speaker="A", start=0.0, end=0.8),
        UsageUpdate(usage=usage),
        BlockEnd(index=0, value="Hi."),
        Finish(status="completed", reason=FinishReason(unified="stop"), usage=usage),
    ]
    assert rebuild(events) == {
        "task": "transcribe",
        "duration": 0.8,
        "text": "Hi.",
        "segments": [
            {
                "type": "transcript.text.segment",
                "id": "seg_0",
                "start": 0.0,
                "end": 0.8,
                "speaker": "A",
                "text": "Hi.",
            }
        ],
        "usage": {"type": "tokens", "input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }
    assert get_dialect(DIALECT).encoder().encode_all(events) == data


def test_duration_usage_stays_raw_and_is_rebuilt() -> None:
    events = _decode((FIXTURES / DIALECT / "duration_usage.sse").read_bytes())
    update = next(e for e in events if isinstance(e, UsageUpdate))
    assert update.usage == Usage(raw={"type": "duration", "seconds": 1.8})
    assert rebuild(events) == {
        "text": "Bonjour à tous.",
        "usage": {"type": "duration", "seconds": 1.8},
    }


def test_in_band_error_fails_the_stream() -> None:
    events = _decode((FIXTURES / DIALECT / "error.sse").read_bytes())
    error = events[-2]
    assert isinstance(error, ErrorEvent)
    assert (error.error.kind, error.error.code, error.error.retryable) == (
        "server",
        "server_error",
        False,  # text was delivered already
    )
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error == error.error


def test_a_stream_without_done_is_truncated() -> None:
    events = _decode(b'data: {"type":"transcript.text.delta","delta":"a"}\n\n')
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.status == "truncated" and finish.error is not None
    assert finish.error.kind == "truncated"


def test_unknown_events_pass_through_or_fail_in_strict_mode() -> None:
    data = b'data: {"type":"transcript.text.language","language":"en"}\n\n'
    events = _decode(data)
    assert events[1] == Unknown(name="transcript.text.language", data=data[6:-2].decode())
    with pytest.raises(RemoteProtocolError, match="unknown event") as info:
        _decode(data, strict=True)
    assert (info.value.dialect, info.value.event_index, info.value.byte_offset) == (DIALECT, 0, 0)


def test_malformed_fields_are_located_protocol_errors() -> None:
    data = (
        b'data: {"type":"transcript.text.delta","delta":"a"}\n\n'
        b'data: {"type":"transcript.text.segment","text":"a","start":"zero"}\n\n'
    )
    with pytest.raises(RemoteProtocolError, match="start is not a number") as info:
        _decode(data, strict=True)
    assert (info.value.event_index, info.value.byte_offset) == (1, 52)
    tolerant = _decode(data)
    assert isinstance(tolerant[3], ErrorEvent) and tolerant[3].error.kind == "protocol"
    assert isinstance(tolerant[-1], Finish) and tolerant[-1].status == "truncated"


def test_an_event_line_is_kept_for_the_round_trip() -> None:
    data = b'event: transcript.text.delta\ndata: {"type":"transcript.text.delta","delta":"a"}\n\n'
    events = _decode(data)
    assert events[2] == TextDelta(index=0, delta="a", extra={"_event": True})
    assert get_dialect(DIALECT).encoder().encode_all(events[:-1]) == data


def test_detection() -> None:
    assert detect(b'data: {"type":"transcript.text.delta","delta":"a"}\n\n') == (DIALECT, "sse")


def test_a_chat_stream_loses_its_text_block_and_writes_done_with_usage() -> None:
    events = [
        StreamStart(dialect="openai_chat", id="chatcmpl-1", model="gpt-x"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="hello"),
        BlockEnd(index=0),
        UsageUpdate(usage=Usage(input_tokens=3, output_tokens=1, reasoning_tokens=1)),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="stop")),
    ]
    encoder = get_dialect(DIALECT).encoder()
    data = encoder.encode_all(events)
    assert data == (
        b'data: {"type":"transcript.text.done","text":"","usage":{"type":"tokens",'
        b'"input_tokens":3,"output_tokens":1,"total_tokens":4}}\n\n'
    )
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("block:text", 1),
        ("usage.reasoning_tokens", 5),
    ]


def test_a_foreign_transcript_and_failure() -> None:
    events = [
        StreamStart(dialect="gemini_generate"),
        BlockStart(index=0, kind="transcript"),
        TextDelta(index=0, delta="hi"),
        ErrorEvent(error=ErrorInfo(kind="overloaded", message="busy")),
        Finish(status="failed", reason=FinishReason(unified="error")),
    ]
    data = get_dialect(DIALECT).encoder().encode_all(events)
    assert data == (
        b'data: {"type":"transcript.text.delta","delta":"hi"}\n\n'
        b'data: {"type":"error","error":{"type":"server_error","code":null,'
        b'"message":"busy","param":null}}\n\n'
    )


def test_the_form_codec_round_trips_the_form() -> None:
    form = {
        "file": {"filename": "a.wav", "content_type": "audio/wav", "size": 1234},
        "model": "gpt-4o-transcribe",
        "stream": "true",
        "include[]": ["logprobs"],
        "language": "en",
    }
    request = parse_request(DIALECT, form)
    assert request.model == "gpt-4o-transcribe" and request.stream is True
    assert request.messages == []
    assert request.extra == {
        "file": form["file"],
        "include[]": ["logprobs"],
        "language": "en",
    }
    native = build_request(DIALECT, request)
    assert native.path == "/audio/transcriptions"
    assert native.body == form
    with pytest.raises(RequestError) as info:
        parse_request(DIALECT, {"model": "m"})
    assert info.value.param == "file"
    with pytest.raises(RequestError) as info:
        parse_request(DIALECT, {**form, "stream": "yes"})
    assert info.value.param == "stream"
