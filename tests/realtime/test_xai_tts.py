"""xAI text to speech over a WebSocket: the URL built from unified parameters, each
utterance's audio an exact unified stream, barge-in, errors, and the commands."""

from __future__ import annotations

import json

import pytest

from polystream.audio import PCM16_24K, PCMU_8K, AudioFormat
from polystream.dialects.xai_tts.binding import Session, tts_query, tts_url
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    MediaInfo,
    StatusUpdate,
    StreamStart,
    Unknown,
)
from polystream.realtime import open_session

from .helpers import messages, payloads, run, where

IMPLICIT = {"implicit": True}
PCM24 = MediaInfo(mime_type="audio/pcm", format="pcm", sample_rate=24000, channels=1)


def test_the_url_query_from_unified_parameters() -> None:
    assert tts_query() == {"language": "auto"}
    assert tts_query(voice="eve", language="en", output=PCM16_24K, speed=1.2) == {
        "voice": "eve",
        "language": "en",
        "codec": "pcm",
        "sample_rate": "24000",
        "speed": "1.2",
    }
    assert tts_url(
        voice="Ara",
        output=PCMU_8K,
        optimize_streaming_latency=1,
        text_normalization=False,
        with_timestamps=True,
        extra={"bit_rate": 64000},
    ) == (
        "wss://api.x.ai/v1/tts?voice=Ara&language=auto&codec=mulaw&sample_rate=8000"
        "&optimize_streaming_latency=1&text_normalization=false&with_timestamps=true"
        "&bit_rate=64000"
    )
    assert tts_url(codec="mp3", language="pt-BR") == (
        "wss://api.x.ai/v1/tts?language=pt-BR&codec=mp3"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"codec": "ogg"}, "unknown codec 'ogg'"),
        ({"output": AudioFormat("pcm16", 24000, 2)}, "speech is mono: 2 channels asked"),
        ({"output": PCM16_24K, "codec": "alaw"}, "codec='alaw' contradicts"),
        ({"output": PCM16_24K, "sample_rate": 16000}, "sample_rate=16000 contradicts"),
        ({"extra": {"voice": "x"}}, "'voice' is a parameter of its own"),
        ({"extra": {"x": [1]}}, "query parameter 'x' must be a string"),
    ],
)
def test_parameters_the_service_cannot_take_are_local_errors(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        tts_query(**params)  # type: ignore[arg-type]
    assert message in caught.value.message and caught.value.dialect == "xai_tts"


def test_utterances_exact_events() -> None:
    lines = messages("xai_tts", "utterances")
    p = payloads(lines)
    session = open_session("xai_tts", voice="eve", output=PCM16_24K, with_timestamps=True)
    assert isinstance(session, Session)
    assert session.url == (
        "wss://api.x.ai/v1/tts?voice=eve&language=auto&codec=pcm&sample_rate=24000"
        "&with_timestamps=true"
    )
    assert session.send_text("Hi") == [
        '{"type":"text.delta","delta":"Hi"}',
        '{"type":"text.done"}',
    ]
    assert session.send_text("Second ", flush=False) + session.send_text("line") == [
        '{"type":"text.delta","delta":"Second "}',
        '{"type":"text.delta","delta":"line"}',
        '{"type":"text.done"}',
    ]
    assert session.pending == 2
    got = where(run(session, lines[:5]))
    assert got == [
        (1, None, None, StreamStart(dialect="xai_tts", extra=IMPLICIT)),
        (1, None, None, BlockStart(index=0, kind="audio", media=PCM24, extra=IMPLICIT)),
        (1, None, None, DataDelta(index=0, delta=p[0]["delta"], extra=p[0])),
        # Timestamps (asked for) come with the audio and stay in the carrier.
        (1, None, None, DataDelta(index=0, delta=p[1]["delta"], extra=p[1])),
        (1, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (
            1,
            None,
            None,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="audio.done"),
                extra=p[2],
            ),
        ),
        (2, None, None, StreamStart(dialect="xai_tts", extra=IMPLICIT)),
        (2, None, None, BlockStart(index=0, kind="audio", media=PCM24, extra=IMPLICIT)),
        (2, None, None, DataDelta(index=0, delta=p[3]["delta"], extra=p[3])),
        # text.clear acknowledged: the utterance under way is cut.
        (2, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (
            2,
            None,
            None,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="cancelled", raw="audio.clear"),
                extra=p[4],
            ),
        ),
    ]
    assert session.pending == 0
    assert session.output_format == PCM16_24K
    # 960 bytes of 24 kHz PCM: 20 ms.
    assert session.output_format.duration_ms(960) == 20.0
    # No utterance runs or waits: the error is the session's.
    error = ErrorInfo(kind="unknown", message="Text exceeds the maximum length.", raw=p[5])
    assert where(session.feed(lines[5])) == [(0, None, None, ErrorEvent(error=error, extra=p[5]))]
    assert session.close() == []


def test_an_error_fails_the_utterance_asked_for() -> None:
    session = Session(codec="wav")
    session.send_text("x" * 10)
    error = {"type": "error", "error": "Voice not found"}
    got = where(session.feed(json.dumps(error)))
    info = ErrorInfo(kind="unknown", message="Voice not found", raw=error)
    assert got == [
        (1, None, None, StreamStart(dialect="xai_tts", extra=IMPLICIT)),
        (1, None, None, ErrorEvent(error=info, extra=error)),
        (
            1,
            None,
            None,
            Finish(
                status="failed",
                reason=FinishReason(unified="error", raw="error"),
                error=info,
                extra=IMPLICIT,
            ),
        ),
    ]
    assert session.pending == 0
    assert session.output_media == MediaInfo(mime_type="audio/wav", format="wav", channels=1)
    assert session.output_format is None  # a container: no raw format


def test_close_truncates_the_running_utterance_and_those_asked_for() -> None:
    session = Session()
    session.send_text("one")
    session.send_text("two")
    session.send_text("three")
    session.feed('{"type":"audio.delta","delta":"AAAA"}')
    truncated = session.close()
    assert [(r.stream, type(r.event).__name__) for r in truncated] == [
        (1, "BlockEnd"),
        (1, "Finish"),
        (2, "StreamStart"),
        (2, "Finish"),
        (3, "StreamStart"),
        (3, "Finish"),
    ]
    finish = truncated[1].event
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.error == ErrorInfo(
        kind="truncated",
        message="the connection closed before audio.done",
        retryable=True,
        dialect="xai_tts",
    )
    # Without a codec in the query the block's format is not stated.
    assert session.output_media is None


def test_clear_with_nothing_running_unknown_messages_and_bad_ones() -> None:
    session = Session()
    assert session.cancel() == ['{"type":"text.clear"}']
    assert [r.event for r in session.feed('{"type":"audio.clear"}')] == [
        StatusUpdate(status="audio.clear", extra={"type": "audio.clear"})
    ]
    text = '{"type":"audio.meta","n":1}'
    assert where(session.feed(text)) == [(0, None, None, Unknown(name="audio.meta", data=text))]
    session.feed('{"type":"audio.delta","delta":""}')
    assert where(session.feed(text))[0][0] == 1  # in the running utterance's stream
    [bad] = session.feed('{"type":"audio.delta","delta":7}')
    assert bad.stream == 0 and isinstance(bad.event, ErrorEvent)
    assert bad.event.error == ErrorInfo(
        kind="protocol", message="audio.delta has no string delta", dialect="xai_tts", event_index=4
    )
    with pytest.raises(RemoteProtocolError) as caught:
        Session(strict=True).feed(text)
    assert caught.value.event_index == 0 and "unknown message type 'audio.meta'" in str(
        caught.value
    )


def test_bounds_and_what_the_family_has_not() -> None:
    session = Session(max_pending=1)
    session.flush()
    with pytest.raises(LocalProtocolError):
        session.flush()
    for missing in (session.configure, session.send_audio, session.truncate):
        with pytest.raises(LocalProtocolError) as caught:
            missing()
        assert caught.value.dialect == "xai_tts"
