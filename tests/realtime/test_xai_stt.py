"""xAI speech to text over a WebSocket: the URL built from unified parameters, raw audio
as bytes messages, each turn's transcript an exact unified stream (interim results,
locked stretches, utterance ends, channels, speakers), errors, bounds and the end."""

from __future__ import annotations

import json

import pytest

from polystream.audio import PCM16_16K, PCMU_8K, AudioError, AudioFormat
from polystream.dialects.xai_stt.binding import Session, stt_query, stt_url
from polystream.errors import BufferLimitExceeded, LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    MediaInfo,
    Metadata,
    SessionUpdate,
    StreamStart,
    TextDelta,
    TranscriptSegment,
    Unknown,
)
from polystream.realtime import open_session

from .helpers import messages, payloads, run, where

IMPLICIT = {"implicit": True}
DONE = FinishReason(unified="stop", raw="transcript.done")


def block(index: int) -> BlockStart:
    return BlockStart(index=index, kind="transcript", extra=IMPLICIT)


def end(index: int) -> BlockEnd:
    return BlockEnd(index=index, status="completed", extra=IMPLICIT)


def test_the_url_query_from_unified_parameters() -> None:
    assert stt_query() == {}
    assert stt_url() == "wss://api.x.ai/v1/stt"
    assert stt_query(input=PCMU_8K, interim_results=True, endpointing=300, language="en") == {
        "sample_rate": "8000",
        "encoding": "mulaw",
        "interim_results": "true",
        "endpointing": "300",
        "language": "en",
    }
    assert stt_url(input=AudioFormat("pcm16", 48000, 2), diarize=True) == (
        "wss://api.x.ai/v1/stt?sample_rate=48000&encoding=pcm&multichannel=true&channels=2"
        "&diarize=true"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sample_rate": 11025}, "sample_rate 11025 is not one of"),
        ({"encoding": "opus"}, "unknown encoding 'opus'"),
        ({"multichannel": True}, "multichannel=True needs channels"),
        ({"multichannel": True, "channels": 9}, "channels=9: 2 to 8"),
        ({"endpointing": 6000}, "endpointing=6000: 0 to 5000 ms"),
        ({"input": PCM16_16K, "sample_rate": 8000}, "sample_rate=8000 contradicts"),
        ({"input": PCM16_16K, "encoding": "alaw"}, "encoding='alaw' contradicts"),
        ({"input": AudioFormat("pcm16", 16000, 2), "channels": 3}, "contradict"),
        ({"extra": {"language": "en"}}, "'language' is a parameter of its own"),
    ],
)
def test_parameters_the_service_cannot_take_are_local_errors(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        stt_query(**params)  # type: ignore[arg-type]
    assert message in caught.value.message and caught.value.dialect == "xai_stt"


def test_turns_exact_events() -> None:
    lines = messages("xai_stt", "turns")
    p = payloads(lines)
    session = open_session("xai_stt", interim_results=True)
    assert isinstance(session, Session)
    assert session.url == "wss://api.x.ai/v1/stt?interim_results=true"
    assert session.input_format == PCM16_16K  # the service's default
    assert session.commit_audio() == ['{"type":"audio.done"}']
    got = where(run(session, lines))
    pcm16k = MediaInfo(mime_type="audio/pcm", format="pcm", sample_rate=16000, channels=1)
    assert got == [
        (0, None, None, SessionUpdate(status="created", input_audio=pcm16k, extra=p[0])),
        (1, None, None, StreamStart(dialect="xai_stt", extra=IMPLICIT)),
        (1, None, None, block(0)),
        (1, None, None, Metadata(name="interim_transcript", value="The quick", extra=p[1])),
        (1, None, None, Metadata(name="interim_transcript", value="The quick brown", extra=p[2])),
        # A stretch locked (is_final): text and a timed segment.
        (1, None, None, TextDelta(index=0, delta="The quick brown fox jumps", extra=p[3])),
        (
            1,
            None,
            None,
            TranscriptSegment(
                index=0, text="The quick brown fox jumps", start=0.0, end=3.0, extra=IMPLICIT
            ),
        ),
        (1, None, None, Metadata(name="interim_transcript", value="over the", extra=p[4])),
        # The utterance's end (speech_final): after a space, then the block ends.
        (1, None, None, TextDelta(index=0, delta=" over the lazy dog.", extra=p[5])),
        (
            1,
            None,
            None,
            TranscriptSegment(
                index=0, text="over the lazy dog.", start=3.0, end=3.0 + 1.4, extra=IMPLICIT
            ),
        ),
        (1, None, None, end(0)),
        (1, None, None, block(1)),
        (1, None, None, TextDelta(index=1, delta="Done.", extra=p[6])),
        (
            1,
            None,
            None,
            TranscriptSegment(index=1, text="Done.", start=5.1, end=5.1 + 0.4, extra=IMPLICIT),
        ),
        (1, None, None, end(1)),
        (1, None, None, Finish(status="completed", reason=DONE, extra=p[7])),
        # A second turn on the same connection; transcript.done brings the rest.
        (2, None, None, StreamStart(dialect="xai_stt", extra=IMPLICIT)),
        (2, None, None, block(0)),
        (2, None, None, TextDelta(index=0, delta="Again", extra=p[8])),
        (
            2,
            None,
            None,
            TranscriptSegment(index=0, text="Again", start=0.0, end=3.0, extra=IMPLICIT),
        ),
        (2, None, None, TextDelta(index=0, delta=" and again.", extra=IMPLICIT)),
        (2, None, None, end(0)),
        (2, None, None, Finish(status="completed", reason=DONE, extra=p[9])),
    ]
    assert session.pending == 0
    assert session.close() == []


def test_channels_and_speakers_exact_events() -> None:
    lines = messages("xai_stt", "multichannel")
    p = payloads(lines)
    session = Session(input=AudioFormat("pcm16", 16000, 2), diarize=True)
    got = where(run(session, lines))
    stereo = MediaInfo(mime_type="audio/pcm", format="pcm", sample_rate=16000, channels=2)
    assert got == [
        (0, None, None, SessionUpdate(status="created", input_audio=stereo, extra=p[0])),
        (1, None, None, StreamStart(dialect="xai_stt", extra=IMPLICIT)),
        (1, None, None, block(0)),
        (1, None, None, TextDelta(index=0, delta="Hello, support.", extra=p[1])),
        (
            1,
            None,
            None,
            TranscriptSegment(
                index=0, text="Hello, support.", start=0.0, end=1.1, speaker="0", extra=IMPLICIT
            ),
        ),
        (1, None, None, end(0)),
        # Each channel's utterance is a block of its own.
        (1, None, None, block(1)),
        (1, None, None, Metadata(name="interim_transcript", value="Hi I", extra=p[2])),
        (1, None, None, block(2)),
        (1, None, None, Metadata(name="interim_transcript", value="How can I", extra=p[3])),
        (1, None, None, TextDelta(index=1, delta="Hi, I need help.", extra=p[4])),
        (
            1,
            None,
            None,
            TranscriptSegment(
                index=1,
                text="Hi, I need help.",
                start=1.2,
                end=1.2 + 1.2,
                speaker="1",
                extra=IMPLICIT,
            ),
        ),
        (1, None, None, end(1)),
        (1, None, None, TextDelta(index=2, delta="How can I help?", extra=p[5])),
        # Its words name two speakers: the segment names none.
        (
            1,
            None,
            None,
            TranscriptSegment(
                index=2, text="How can I help?", start=1.2, end=1.2 + 1.1, extra=IMPLICIT
            ),
        ),
        (1, None, None, end(2)),
        (1, None, None, Finish(status="completed", reason=DONE, extra=p[6])),
    ]


def test_audio_goes_as_bytes_messages_in_whole_frames() -> None:
    session = Session(input=PCM16_16K)
    audio = bytes(range(256)) * 25  # 6400 bytes: 200 ms
    assert session.send_audio(audio) == [audio]
    chunks = session.send_audio(audio, chunk_ms=90)
    assert [len(c) for c in chunks] == [2880, 2880, 640]
    assert b"".join(chunks) == audio
    assert session.send_audio(b"") == []
    with pytest.raises(AudioError):
        session.send_audio(b"\x00")  # half a frame
    with pytest.raises(LocalProtocolError):
        session.send_audio(audio, chunk_ms=0.01)
    with pytest.raises(LocalProtocolError) as caught:
        session.configure(language="en")
    assert "configured by its URL's query" in caught.value.message


def test_an_error_fails_the_turn_or_is_the_session_s() -> None:
    error = {"type": "error", "message": "Unsupported sample rate"}
    info = ErrorInfo(kind="unknown", message="Unsupported sample rate", raw=error)
    session = Session()
    assert where(session.feed(json.dumps(error))) == [
        (0, None, None, ErrorEvent(error=info, extra=error))
    ]
    partial = {"type": "transcript.partial", "text": "Hi", "is_final": False}
    session.feed(json.dumps(partial))
    failed = Finish(
        status="failed",
        reason=FinishReason(unified="error", raw="error"),
        error=info,
        extra=IMPLICIT,
    )
    assert where(session.feed(json.dumps(error))) == [
        (1, None, None, ErrorEvent(error=info, extra=error)),
        (1, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (1, None, None, failed),
    ]
    # With a turn asked for (audio.done sent) and none running, the error is its.
    session.commit_audio()
    assert [(r.stream, r.event) for r in session.feed(json.dumps(error))] == [
        (2, StreamStart(dialect="xai_stt", extra=IMPLICIT)),
        (2, ErrorEvent(error=info, extra=error)),
        (2, failed),
    ]
    assert session.pending == 0


def test_close_truncates_the_running_turn_and_those_asked_for() -> None:
    session = Session()
    session.commit_audio()
    session.commit_audio()
    session.feed('{"type":"transcript.partial","text":"Hel","is_final":false}')
    got = session.close()
    assert [(r.stream, type(r.event).__name__) for r in got] == [
        (1, "BlockEnd"),
        (1, "Finish"),
        (2, "StreamStart"),
        (2, "Finish"),
    ]
    last = got[-1].event
    assert isinstance(last, Finish) and last.status == "truncated"
    assert last.error is not None and last.error.message == (
        "the connection closed before any transcript"
    )
    with pytest.raises(LocalProtocolError):
        session.feed('{"type":"transcript.created"}')


def test_unknown_messages_pass_through_in_the_running_turn() -> None:
    session = Session()
    text = '{"type":"transcript.language","language":"en"}'
    assert where(session.feed(text)) == [
        (0, None, None, Unknown(name="transcript.language", data=text))
    ]
    session.feed('{"type":"transcript.partial","text":"a","is_final":false}')
    assert where(session.feed(text))[-1] == (
        1,
        None,
        None,
        Unknown(name="transcript.language", data=text),
    )


def test_malformed_messages_and_bounds_are_located() -> None:
    session = Session(max_channels=2, max_pending=1)
    bad = [
        {"type": "transcript.partial", "text": 3},
        {"type": "transcript.partial", "text": "x", "channel_index": -1},
        {"type": "transcript.done", "text": ["x"]},
    ]
    for index, message in enumerate(bad):
        [routed] = session.feed(json.dumps(message))
        assert isinstance(routed.event, ErrorEvent)
        assert routed.event.error.kind == "protocol"
        assert routed.event.error.event_index == index
    for channel in (0, 1):
        session.feed(
            json.dumps({"type": "transcript.partial", "text": "a", "channel_index": channel})
        )
    strict = Session(strict=True, max_channels=1)
    strict.feed('{"type":"transcript.partial","text":"a","channel_index":0}')
    with pytest.raises(BufferLimitExceeded) as caught:
        strict.feed('{"type":"transcript.partial","text":"b","channel_index":1}')
    assert caught.value.event_index == 1
    with pytest.raises(RemoteProtocolError):
        strict.feed(b"\x00\x01")  # the server sends no binary messages
    session.commit_audio()
    with pytest.raises(LocalProtocolError):
        session.commit_audio()
