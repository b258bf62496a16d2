"""The Gemini Live session (``gemini_live``): exact events from the fixtures, binary
frames read as text ones, the protocol errors located by message, the close codes as
typed errors, and the commands' exact messages."""

from __future__ import annotations

import base64
import json

import pytest

from polystream.dialects.gemini_live.resumption import ResumptionContext
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    Lifetime,
    MediaInfo,
    Metadata,
    ReasoningDelta,
    Resumption,
    SessionUpdate,
    SignatureDelta,
    Speech,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)
from polystream.realtime import open_session
from tests.realtime.helpers import messages, run

MODEL = "gemini-live-2.5-flash-preview"
FAMILY = "gemini_live"
PCM24 = MediaInfo(mime_type="audio/pcm;rate=24000", format="pcm", sample_rate=24000, channels=1)
PCM16 = MediaInfo(mime_type="audio/pcm;rate=16000", format="pcm", sample_rate=16000, channels=1)
START = StreamStart(dialect=FAMILY, model=MODEL)


def session(**options: object):  # type: ignore[no-untyped-def]
    return open_session(FAMILY, model=MODEL, **options)


def events(name: str, *, close: bool = False) -> list[tuple[int, object]]:
    return [(r.stream, r.event) for r in run(session(), messages(FAMILY, name), close=close)]


def test_text_turn() -> None:
    meta = json.loads(messages(FAMILY, "text_turn")[4])["usageMetadata"]
    usage = Usage(input_tokens=9, output_tokens=3, total_tokens=12, raw=meta)
    assert events("text_turn") == [
        (
            0,
            SessionUpdate(
                status="created",
                id="s-1",
                model=MODEL,
                config={"sessionId": "s-1"},
                input_audio=PCM16,
                output_audio=PCM24,
            ),
        ),
        (1, START),
        (1, BlockStart(index=0, kind="text")),
        (1, TextDelta(index=0, delta="Hello")),
        (1, TextDelta(index=0, delta=" there.")),
        (1, StatusUpdate(status="generation_complete")),
        (1, UsageUpdate(usage=usage)),
        (1, BlockEnd(index=0)),
        (
            1,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="TURN_COMPLETE_REASON_UNSPECIFIED"),
                usage=usage,
                extra={
                    "turnCompleteReason": "TURN_COMPLETE_REASON_UNSPECIFIED",
                    "interactionStatus": "IDLE",
                },
            ),
        ),
        (0, Resumption(handle="CiQ0YjQy", resumable=True, last_consumed=1)),
    ]


def test_audio_turn_with_transcriptions() -> None:
    meta = json.loads(messages(FAMILY, "audio_turn")[8])["usageMetadata"]
    usage = Usage(
        input_tokens=40,
        output_tokens=30,
        reasoning_tokens=5,
        audio_input_tokens=40,
        audio_output_tokens=25,
        total_tokens=70,
        raw=meta,
    )
    mime = "audio/pcm;rate=24000"
    assert events("audio_turn") == [
        (
            0,
            SessionUpdate(
                status="created", model=MODEL, config={}, input_audio=PCM16, output_audio=PCM24
            ),
        ),
        (0, BlockStart(index=0, kind="transcript", name="input")),
        (0, TextDelta(index=0, delta="What's the")),
        (0, TextDelta(index=0, delta=" time?")),
        (0, BlockEnd(index=0)),
        (1, START),
        (1, BlockStart(index=0, kind="audio", media=PCM24)),
        (1, DataDelta(index=0, delta="AAABAA==", mime_type=mime)),
        (1, BlockStart(index=1, kind="transcript")),
        (1, TextDelta(index=1, delta="It is")),
        (1, DataDelta(index=0, delta="AgADAA==", mime_type=mime)),
        (1, TextDelta(index=1, delta=" noon.")),
        (1, StatusUpdate(status="generation_complete")),
        (1, UsageUpdate(usage=usage)),
        (1, BlockEnd(index=0)),
        (1, BlockEnd(index=1)),
        (1, Finish(status="completed", reason=FinishReason(unified="stop"), usage=usage)),
    ]


def test_tool_call_opens_the_turn_that_goes_on_after_the_response() -> None:
    assert events("tool_call") == [
        (1, START),
        (1, BlockStart(index=0, kind="tool_call", id="fc-1", call_id="fc-1", name="get_weather")),
        (1, ToolInputDelta(index=0, delta='{"city":"Paris"}')),
        (1, BlockEnd(index=0)),
        (1, BlockStart(index=1, kind="text")),
        (1, TextDelta(index=1, delta="It is sunny.")),
        (1, BlockEnd(index=1)),
        (1, Finish(status="completed", reason=FinishReason(unified="stop"))),
    ]


def test_tool_result_names_the_call() -> None:
    live = session()
    live.feed(messages(FAMILY, "tool_call")[0])
    assert live.tool_result("fc-1", {"temp": 21}) == [
        '{"setup":{"model":"models/gemini-live-2.5-flash-preview"}}',
        '{"toolResponse":{"functionResponses":[{"id":"fc-1","name":"get_weather",'
        '"response":{"temp":21}}]}}',
    ]
    assert live.tool_result("fc-1", "sunny", scheduling="SILENT") == [
        '{"toolResponse":{"functionResponses":[{"id":"fc-1","name":"get_weather",'
        '"response":{"output":"sunny"},"scheduling":"SILENT"}]}}'
    ]
    with pytest.raises(LocalProtocolError, match="fc-9"):
        live.tool_result("fc-9", "x")


def test_a_turn_ending_on_tool_calls() -> None:
    live = session()
    routed = live.feed(messages(FAMILY, "tool_call")[0]) + live.feed(
        '{"serverContent":{"turnComplete":true}}'
    )
    assert routed[-1].event == Finish(status="completed", reason=FinishReason(unified="tool_calls"))


def test_interrupted_ends_the_turn_at_once() -> None:
    assert events("interrupted") == [
        (1, START),
        (1, BlockStart(index=0, kind="text")),
        (1, TextDelta(index=0, delta="Once upon")),
        (1, BlockEnd(index=0)),
        (
            1,
            Finish(
                status="incomplete", reason=FinishReason(unified="cancelled", raw="interrupted")
            ),
        ),
        (0, StatusUpdate(status="turn_complete")),
    ]


def test_session_news() -> None:
    assert events("session_news") == [
        (
            0,
            Lifetime(
                state="going_away",
                reason="goAway",
                max_duration=600.0,
                time_left=50.0,
                extra={"timeLeft": "50s"},
            ),
        ),
        (0, Resumption(handle=None, resumable=False)),
        (0, Speech(state="started", start_ms=1500)),
        (0, Speech(state="stopped")),
        (0, Metadata(name="tool_call_cancellation", value={"ids": ["fc-1"]})),
        (0, Unknown(name="futureNews", data='{"futureNews":{"x":1}}')),
        (0, Metadata(name="interim_transcript", value={"text": "Hel"})),
    ]


def test_parts_thoughts_code_and_a_blocked_finish() -> None:
    assert events("parts") == [
        (1, START),
        (1, BlockStart(index=0, kind="reasoning")),
        (1, ReasoningDelta(index=0, delta="Thinking it over.")),
        (1, BlockEnd(index=0)),
        (1, BlockStart(index=1, kind="text")),
        (1, TextDelta(index=1, delta="Run this:")),
        (1, SignatureDelta(index=1, delta="c2ln")),
        (1, BlockEnd(index=1)),
        (1, BlockStart(index=2, kind="code", value={"language": "PYTHON", "code": "print(1)"})),
        (1, BlockEnd(index=2)),
        (
            1,
            BlockStart(
                index=3, kind="code_result", value={"outcome": "OUTCOME_OK", "output": "1\n"}
            ),
        ),
        (1, BlockEnd(index=3)),
        (
            1,
            BlockStart(
                index=4, kind="other", name="part", value={"fileData": {"fileUri": "gs://b/f"}}
            ),
        ),
        (1, BlockEnd(index=4)),
        (1, Unknown(name="serverContent.futureField", data="7")),
        (1, Metadata(name="grounding", value={"webSearchQueries": ["q"]})),
        (
            1,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="content_filter", raw="PROHIBITED_INPUT_CONTENT"),
                extra={"turnCompleteReason": "PROHIBITED_INPUT_CONTENT"},
            ),
        ),
    ]


@pytest.mark.parametrize("name", ["text_turn", "audio_turn", "tool_call", "parts"])
def test_binary_frames_read_as_text_frames(name: str) -> None:
    lines = messages(FAMILY, name)
    as_text = [(r.stream, r.event) for r in run(session(), lines)]
    as_bytes = [(r.stream, r.event) for r in run(session(), [line.encode() for line in lines])]
    assert as_bytes == as_text


def test_the_close_ends_a_running_turn_truncated() -> None:
    routed = events("interrupted")[:3]
    live = session()
    live.feed(messages(FAMILY, "interrupted")[0])
    closing = [(r.stream, r.event) for r in live.close()]
    assert routed[0] == (1, START)
    assert closing == [
        (1, BlockEnd(index=0)),
        (
            1,
            Finish(
                status="truncated",
                reason=FinishReason(unified="error"),
                error=ErrorInfo(
                    kind="truncated", message="the connection closed before the turn completed"
                ),
            ),
        ),
    ]


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [(1007, "invalid_request", False), (1008, "permission", False), (1011, "server", True)],
)
def test_close_codes_are_typed_errors(code: int, kind: str, retryable: bool) -> None:
    live = session()
    live.feed(messages(FAMILY, "interrupted")[0])
    error = ErrorInfo(
        kind=kind,  # type: ignore[arg-type]
        message="Deadline expired",
        retryable=retryable,
        code=str(code),
        dialect=FAMILY,
    )
    assert [(r.stream, r.event) for r in live.close_code(code, "Deadline expired")] == [
        (1, ErrorEvent(error=error)),
        (1, BlockEnd(index=0)),
        (
            1,
            Finish(
                status="failed", reason=FinishReason(unified="error", raw=str(code)), error=error
            ),
        ),
    ]
    assert session().close_code(1000) == []
    idle = [(r.stream, r.event) for r in session().close_code(1007, "")]
    assert idle == [
        (
            0,
            ErrorEvent(
                error=ErrorInfo(
                    kind="invalid_request",
                    message="the connection closed with code 1007",
                    code="1007",
                    dialect=FAMILY,
                )
            ),
        )
    ]


def test_protocol_errors_are_located() -> None:
    live = session()
    live.feed('{"setupComplete":{}}')
    out = live.feed("{}") + live.feed('{"serverContent":[]}') + live.feed("not json")
    located = [(type(r.event).__name__, r.event.error.event_index) for r in out]  # type: ignore[union-attr]
    assert located == [("ErrorEvent", 1), ("ErrorEvent", 2), ("ErrorEvent", 3)]
    assert out[0].event.error.message == "message is an empty object"  # type: ignore[union-attr]
    strict = session(strict=True)
    with pytest.raises(RemoteProtocolError) as caught:
        strict.feed('{"toolCall":{"functionCalls":{}}}')
    assert caught.value.event_index == 0
    assert "functionCalls" in caught.value.message
    with pytest.raises(RemoteProtocolError, match="unknown message type 'futureNews'"):
        session(strict=True).feed('{"futureNews":{}}')


# -- the commands ----------------------------------------------------------------------


def test_the_setup_comes_first_and_once() -> None:
    live = session()
    assert live.configure(
        instructions="Be brief.",
        generationConfig={"responseModalities": ["TEXT"]},
        resumption=True,
        transparent=True,
    ) == [
        '{"setup":{"generationConfig":{"responseModalities":["TEXT"]},'
        '"model":"models/gemini-live-2.5-flash-preview",'
        '"systemInstruction":{"parts":[{"text":"Be brief."}]},'
        '"sessionResumption":{"transparent":true}}}'
    ]
    with pytest.raises(LocalProtocolError, match="sent once"):
        live.configure()
    assert live.send_text("Hi") == [
        '{"clientContent":{"turns":[{"role":"user","parts":[{"text":"Hi"}]}],"turnComplete":true}}'
    ]
    assert live.send_text("Hi", realtime=True) == ['{"realtimeInput":{"text":"Hi"}}']
    assert live.create_response() == ['{"clientContent":{"turnComplete":true}}']
    assert live.activity_start() == ['{"realtimeInput":{"activityStart":{}}}']
    assert live.activity_end() == ['{"realtimeInput":{"activityEnd":{}}}']
    assert live.audio_stream_end() == ['{"realtimeInput":{"audioStreamEnd":true}}']
    with pytest.raises(LocalProtocolError, match="needs a model"):
        open_session(FAMILY).send_text("Hi")


def test_send_audio_at_16_khz_and_resampled() -> None:
    live = session()
    live.configure()
    pcm = b"\x01\x00\x02\x00" * 4
    assert live.send_audio(pcm) == [
        json.dumps(
            {
                "realtimeInput": {
                    "audio": {
                        "data": base64.b64encode(pcm).decode(),
                        "mimeType": "audio/pcm;rate=16000",
                    }
                }
            },
            separators=(",", ":"),
        )
    ]
    samples = b"".join((1000).to_bytes(2, "little", signed=True) for _ in range(2400))
    (sent,) = live.send_audio(samples, rate=24000)
    audio = json.loads(sent)["realtimeInput"]["audio"]
    assert audio["mimeType"] == "audio/pcm;rate=16000"
    assert len(base64.b64decode(audio["data"])) == 1600 * 2  # 0.1 s at 16 kHz
    (kept,) = live.send_audio(samples, rate=24000, resample=False)
    assert json.loads(kept)["realtimeInput"]["audio"]["mimeType"] == "audio/pcm;rate=24000"


# -- resumption ------------------------------------------------------------------------


def test_resumption_keeps_what_the_handle_does_not_include() -> None:
    record = ResumptionContext()
    live = session()
    sent = [
        *live.configure(resumption=True, transparent=True),
        *live.send_text("one"),
        *live.send_text("two"),
        *live.send_text("three"),
    ]
    for message in sent:
        record.sent(message)
    assert not record.reconnectable and record.replay() == []
    record.received(
        {
            "sessionResumptionUpdate": {
                "newHandle": "h1",
                "resumable": True,
                "lastConsumedClientMessageIndex": "1",
            }
        }
    )
    record.received({"sessionResumptionUpdate": {"newHandle": "", "resumable": False}})
    assert record.handle == "h1" and record.reconnectable
    assert record.pending == sent[2:]
    replay = record.replay()
    assert json.loads(replay[0]) == {
        "setup": {
            "model": "models/gemini-live-2.5-flash-preview",
            "sessionResumption": {"transparent": True, "handle": "h1"},
        }
    }
    assert replay[1:] == sent[2:]
    # On the new connection the messages sent again are 1 and 2; "four" is 3.
    (four,) = live.send_text("four")
    record.sent(four)
    record.received(
        {
            "sessionResumptionUpdate": {
                "newHandle": "h2",
                "resumable": True,
                "lastConsumedClientMessageIndex": "2",
            }
        }
    )
    assert record.pending == [four]
    assert json.loads(record.replay()[0])["setup"]["sessionResumption"]["handle"] == "h2"


def test_resumption_without_transparency_resends_what_followed_the_update() -> None:
    record = ResumptionContext()
    live = session()
    for message in [*live.configure(resumption=True), *live.send_text("one")]:
        record.sent(message)
    record.received({"sessionResumptionUpdate": {"newHandle": "h1", "resumable": True}})
    (two,) = live.send_text("two")
    record.sent(two)
    assert record.replay()[1:] == [two]


def test_one_message_or_several_give_the_same_turn() -> None:
    # The server may put a turn's content and its end in one message, or spread them.
    apart = [
        '{"serverContent":{"modelTurn":{"parts":[{"text":"Hel"}]}}}',
        '{"serverContent":{"modelTurn":{"parts":[{"text":"lo"}]}}}',
        '{"serverContent":{"generationComplete":true}}',
        '{"usageMetadata":{"totalTokenCount":3}}',
        '{"serverContent":{"turnComplete":true}}',
    ]
    together = [
        '{"serverContent":{"modelTurn":{"parts":[{"text":"Hel"},{"text":"lo"}]},'
        '"generationComplete":true,"turnComplete":true},"usageMetadata":{"totalTokenCount":3}}'
    ]
    usage = Usage(total_tokens=3, raw={"totalTokenCount": 3})
    expected = [
        (1, START),
        (1, BlockStart(index=0, kind="text")),
        (1, TextDelta(index=0, delta="Hel")),
        (1, TextDelta(index=0, delta="lo")),
        (1, StatusUpdate(status="generation_complete")),
        (1, UsageUpdate(usage=usage)),
        (1, BlockEnd(index=0)),
        (1, Finish(status="completed", reason=FinishReason(unified="stop"), usage=usage)),
    ]
    assert [(r.stream, r.event) for r in run(session(), apart)] == expected
    assert [(r.stream, r.event) for r in run(session(), together)] == expected
