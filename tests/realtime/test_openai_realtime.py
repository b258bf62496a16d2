"""OpenAI Realtime: exact events of hand-written sessions, the retired beta vocabulary,
barge-in, lifetime, errors located by message, and the commands' exact messages."""

from __future__ import annotations

import base64
import json

import pytest

from polystream.audio import PCM16_24K
from polystream.dialects.openai_realtime.binding import Session
from polystream.errors import (
    BufferLimitExceeded,
    EventOrderError,
    LocalProtocolError,
    RemoteProtocolError,
)
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
    RateLimit,
    RateLimits,
    SessionUpdate,
    Speech,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    TranscriptSegment,
    Unknown,
    Usage,
    UsageUpdate,
)

from .helpers import messages, payloads, run, where

IMPLICIT = {"implicit": True}
PCM24 = MediaInfo(mime_type="audio/pcm", sample_rate=24000, channels=1)


def test_voice_turn_exact_events() -> None:
    lines = messages("openai_realtime", "voice_turn")
    p = payloads(lines)
    session = Session()
    got = where(run(session, lines))
    r = "resp_C9Gk9"
    user, asst = "item_C9GkAuser", "item_C9GkBasst"
    usage = p[23]["response"]["usage"]
    assert got == [
        (
            0,
            None,
            None,
            SessionUpdate(
                status="created",
                id="sess_C9Gk8uWRlGZ2VlwDkTzNa",
                model="gpt-realtime",
                config=p[0]["session"],
                input_audio=PCM24,
                output_audio=PCM24,
                extra=p[0],
            ),
        ),
        (
            0,
            None,
            None,
            SessionUpdate(
                status="updated",
                id="sess_C9Gk8uWRlGZ2VlwDkTzNa",
                model="gpt-realtime",
                config=p[1]["session"],
                input_audio=PCM24,
                output_audio=PCM24,
                extra=p[1],
            ),
        ),
        (0, None, None, Speech(state="started", start_ms=1024, item_id=user, extra=p[2])),
        (0, None, None, Speech(state="stopped", end_ms=2304, item_id=user, extra=p[3])),
        (0, None, None, StatusUpdate(status="input_audio_buffer.committed", extra=p[4])),
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[5])),
        (1, None, r, StreamStart(dialect="openai_realtime", id=r, extra=p[6])),
        (0, None, None, BlockStart(index=0, kind="transcript", id=user, extra=IMPLICIT)),
        (0, None, None, TextDelta(index=0, delta="Hi", part=0, extra=p[7])),
        (
            0,
            None,
            None,
            RateLimits(
                limits=[
                    RateLimit(name="requests", limit=1000, remaining=999, reset_seconds=60.0),
                    RateLimit(name="tokens", limit=50000, remaining=49114, reset_seconds=1.062),
                ],
                extra=p[8],
            ),
        ),
        (1, None, r, StatusUpdate(status="in_progress", extra=p[9])),
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[10])),
        (1, None, r, BlockStart(index=0, kind="audio", id=asst, media=PCM24, extra=p[11])),
        (1, None, r, BlockStart(index=1, kind="transcript", id=asst, extra=IMPLICIT)),
        (0, None, None, TextDelta(index=0, delta=" there", part=0, extra=p[12])),
        (
            0,
            None,
            None,
            UsageUpdate(
                usage=Usage(
                    input_tokens=17,
                    output_tokens=4,
                    total_tokens=21,
                    audio_input_tokens=17,
                    raw=p[13]["usage"],
                ),
                extra=IMPLICIT,
            ),
        ),
        (0, None, None, BlockEnd(index=0, status="completed", value="Hi there", extra=p[13])),
        (1, None, r, TextDelta(index=1, delta="Hello", part=0, extra=p[14])),
        (1, None, r, DataDelta(index=0, delta=p[15]["delta"], extra=p[15])),
        (1, None, r, TextDelta(index=1, delta=" there!", part=0, extra=p[16])),
        (1, None, r, DataDelta(index=0, delta=p[17]["delta"], extra=p[17])),
        (1, None, r, StatusUpdate(status="done", extra=p[18])),
        (1, None, r, StatusUpdate(status="done", extra=p[19])),
        (1, None, r, BlockEnd(index=0, extra=p[20])),
        (1, None, r, BlockEnd(index=1, value="Hello there!", extra=IMPLICIT)),
        (1, None, r, StatusUpdate(status="completed", extra=p[21])),
        (0, None, None, StatusUpdate(status="conversation.item.done", extra=p[22])),
        (
            1,
            None,
            r,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="completed"),
                usage=Usage(
                    input_tokens=173,
                    output_tokens=80,
                    total_tokens=253,
                    cache_read_tokens=64,
                    audio_input_tokens=54,
                    audio_output_tokens=60,
                    raw=usage,
                ),
                extra=p[23],
            ),
        ),
    ]
    assert session.session_id == "sess_C9Gk8uWRlGZ2VlwDkTzNa"
    assert session.output_format == PCM16_24K
    assert session.active_responses == []
    assert session.close() == []


def test_tool_call_beside_an_out_of_band_response() -> None:
    lines = messages("openai_realtime", "tool_call_out_of_band")
    p = payloads(lines)
    got = where(run(Session(), lines))
    a, b = "resp_A", "resp_B"
    assert got == [
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[0])),
        (0, None, None, StatusUpdate(status="conversation.item.done", extra=p[1])),
        (1, None, a, StreamStart(dialect="openai_realtime", id=a, extra=p[2])),
        (2, None, b, StreamStart(dialect="openai_realtime", id=b, extra=p[3])),
        (
            1,
            None,
            a,
            BlockStart(
                index=0,
                kind="tool_call",
                id="item_fc1",
                call_id="call_w1",
                name="get_weather",
                extra=p[4],
            ),
        ),
        (2, None, b, StatusUpdate(status="in_progress", extra=p[5])),
        (1, None, a, ToolInputDelta(index=0, delta='{"city":', extra=p[6])),
        (2, None, b, BlockStart(index=0, kind="text", id="item_txt", extra=p[7])),
        (1, None, a, ToolInputDelta(index=0, delta='"Paris"}', extra=p[8])),
        (2, None, b, TextDelta(index=0, delta="weather", part=0, extra=p[9])),
        (1, None, a, StatusUpdate(status="done", extra=p[10])),
        (2, None, b, StatusUpdate(status="done", extra=p[11])),
        (1, None, a, BlockEnd(index=0, status="completed", value='{"city":"Paris"}', extra=p[12])),
        (2, None, b, BlockEnd(index=0, value="weather", extra=p[13])),
        (
            1,
            None,
            a,
            Finish(
                status="completed",
                reason=FinishReason(unified="tool_calls", raw="completed"),
                usage=Usage(
                    input_tokens=80,
                    output_tokens=10,
                    total_tokens=90,
                    cache_read_tokens=0,
                    audio_input_tokens=0,
                    audio_output_tokens=0,
                    raw=p[14]["response"]["usage"],
                ),
                extra=p[14],
            ),
        ),
        (2, None, b, StatusUpdate(status="completed", extra=p[15])),
        (
            2,
            None,
            b,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="completed"),
                usage=Usage(
                    input_tokens=84,
                    output_tokens=1,
                    total_tokens=85,
                    cache_read_tokens=0,
                    audio_input_tokens=0,
                    audio_output_tokens=0,
                    raw=p[16]["response"]["usage"],
                ),
                extra=p[16],
            ),
        ),
    ]


def test_retired_beta_vocabulary_is_read_as_ga_with_a_note() -> None:
    lines = messages("openai_realtime", "beta_vocabulary")
    p = payloads(lines)
    session = Session()
    got = where(run(session, lines))

    def beta(i: int, ga: str) -> dict[str, object]:
        return {**p[i], "retired_beta": ga}

    ulaw = MediaInfo(mime_type="audio/pcmu", format="g711_ulaw", sample_rate=8000, channels=1)
    pcm = MediaInfo(mime_type="audio/pcm", format="pcm16", sample_rate=24000, channels=1)
    r1, r2 = "resp_beta1", "resp_beta2"
    assert got == [
        (
            0,
            None,
            None,
            SessionUpdate(
                status="created",
                id="sess_beta1",
                model="gpt-4o-realtime-preview-2024-12-17",
                config=p[0]["session"],
                input_audio=pcm,
                output_audio=ulaw,
                extra=p[0],
            ),
        ),
        (
            0,
            None,
            None,
            SessionUpdate(
                status="updated",
                id="sess_beta1",
                config=p[1]["session"],
                input_audio=pcm,
                extra=beta(1, "session.updated"),
            ),
        ),
        (1, None, r1, StreamStart(dialect="openai_realtime", id=r1, extra=p[2])),
        (1, None, r1, StatusUpdate(status="in_progress", extra=p[3])),
        (0, None, None, StatusUpdate(status="conversation.item.created", extra=p[4])),
        (1, None, r1, BlockStart(index=0, kind="audio", id="item_beta1", media=ulaw, extra=p[5])),
        (1, None, r1, BlockStart(index=1, kind="transcript", id="item_beta1", extra=IMPLICIT)),
        (
            1,
            None,
            r1,
            TextDelta(
                index=1,
                delta="Hel",
                part=0,
                extra=beta(6, "response.output_audio_transcript.delta"),
            ),
        ),
        (
            1,
            None,
            r1,
            DataDelta(index=0, delta=p[7]["delta"], extra=beta(7, "response.output_audio.delta")),
        ),
        (0, None, None, Speech(state="started", start_ms=3000, item_id="item_user2", extra=p[8])),
        (1, None, r1, StatusUpdate(status="done", extra=beta(9, "response.output_audio.done"))),
        (
            1,
            None,
            r1,
            StatusUpdate(status="done", extra=beta(10, "response.output_audio_transcript.done")),
        ),
        (1, None, r1, BlockEnd(index=0, extra=p[11])),
        (1, None, r1, BlockEnd(index=1, value="Hel", extra=IMPLICIT)),
        (1, None, r1, StatusUpdate(status="incomplete", extra=p[12])),
        (
            1,
            None,
            r1,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="cancelled", raw="turn_detected"),
                usage=Usage(
                    input_tokens=30,
                    output_tokens=10,
                    total_tokens=40,
                    cache_read_tokens=0,
                    audio_input_tokens=20,
                    audio_output_tokens=7,
                    raw=p[13]["response"]["usage"],
                ),
                extra=p[13],
            ),
        ),
        (2, None, r2, StreamStart(dialect="openai_realtime", id=r2, extra=p[14])),
        (2, None, r2, StatusUpdate(status="in_progress", extra=p[15])),
        (2, None, r2, BlockStart(index=0, kind="text", id="item_beta2", extra=p[16])),
        (
            2,
            None,
            r2,
            TextDelta(index=0, delta="OK", part=0, extra=beta(17, "response.output_text.delta")),
        ),
        (2, None, r2, StatusUpdate(status="done", extra=beta(18, "response.output_text.done"))),
        (2, None, r2, BlockEnd(index=0, value="OK", extra=p[19])),
        (2, None, r2, StatusUpdate(status="completed", extra=p[20])),
        (
            2,
            None,
            r2,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="length", raw="max_output_tokens"),
                extra=p[21],
            ),
        ),
    ]
    # The beta session's μ-law output: 800 bytes are 100 ms.
    assert session.received_ms("item_beta1") == 100.0


# -- barge-in -----------------------------------------------------------------------------


def _audio_turn(session: Session, *chunks: bytes, done: bool = False) -> None:
    """A response whose audio item receives ``chunks``."""

    def send(**message: object) -> None:
        session.feed(json.dumps(message))

    send(
        type="response.created",
        event_id="e1",
        response={"id": "resp_1", "status": "in_progress", "output": []},
    )
    send(
        type="response.output_item.added",
        event_id="e2",
        response_id="resp_1",
        output_index=0,
        item={"id": "item_1", "type": "message", "role": "assistant", "content": []},
    )
    send(
        type="response.content_part.added",
        event_id="e3",
        response_id="resp_1",
        item_id="item_1",
        output_index=0,
        content_index=0,
        part={"type": "audio", "transcript": ""},
    )
    for chunk in chunks:
        send(
            type="response.output_audio.delta",
            event_id="e4",
            response_id="resp_1",
            item_id="item_1",
            output_index=0,
            content_index=0,
            delta=base64.b64encode(chunk).decode(),
        )
    if done:
        send(
            type="response.done",
            event_id="e5",
            response={"id": "resp_1", "status": "completed", "output": []},
        )


TRUNCATE = (
    '{{"type":"conversation.item.truncate","item_id":"item_1","content_index":0,"audio_end_ms":{}}}'
)
CANCEL = '{"type":"response.cancel","response_id":"resp_1"}'


def test_barge_in_clamps_to_the_audio_received_and_cancels_a_running_response() -> None:
    session = Session()
    _audio_turn(session, b"\x00" * 4800, b"\x00" * 2401)  # 100 ms + 50.02 ms at 24 kHz
    assert session.received_ms() == pytest.approx(150.0208, abs=1e-3)
    # The player says 2 s were played: the server never sent that much.
    assert session.barge_in(played_ms=2000) == [TRUNCATE.format(150), CANCEL]
    # Cut once: a second call only cancels (the response still runs until response.done).
    assert session.barge_in(played_ms=10) == [CANCEL]


def test_barge_in_at_the_played_position_without_cancel_once_done() -> None:
    session = Session()
    _audio_turn(session, b"\x00" * 9600, done=True)  # 200 ms
    assert session.active_responses == []
    assert session.barge_in(played_ms=87.9) == [TRUNCATE.format(87)]
    fresh = Session()
    _audio_turn(fresh, b"\x00" * 9600)
    assert fresh.barge_in() == [TRUNCATE.format(200), CANCEL]
    negative = Session()
    _audio_turn(negative, b"\x00" * 9600)
    assert negative.barge_in(played_ms=-5) == [TRUNCATE.format(0), CANCEL]


def test_a_truncated_item_is_not_cut_again() -> None:
    session = Session()
    _audio_turn(session, b"\x00" * 4800)
    truncated = {
        "type": "conversation.item.truncated",
        "event_id": "e9",
        "item_id": "item_1",
        "content_index": 0,
        "audio_end_ms": 40,
    }
    session.feed(json.dumps(truncated))
    assert session.barge_in(played_ms=60) == [CANCEL]


def test_barge_in_without_audio_never_truncates() -> None:
    session = Session()
    assert session.barge_in(played_ms=500) == []  # nothing running, nothing played
    _audio_turn(session)  # a response, no audio yet
    assert session.received_ms() == 0.0
    assert session.barge_in(played_ms=500) == [CANCEL]
    # An item with no audio received: nothing to cut, the running response is cancelled.
    assert session.barge_in(item_id="item_unknown") == [CANCEL]


def test_barge_in_in_g711_uses_eight_bytes_a_millisecond() -> None:
    session = Session()
    config = {"type": "realtime", "audio": {"output": {"format": {"type": "audio/pcma"}}}}
    session.feed(json.dumps({"type": "session.updated", "event_id": "e0", "session": config}))
    _audio_turn(session, b"\xd5" * 1000)
    assert session.received_ms("item_1") == 125.0
    assert session.barge_in(played_ms=130) == [TRUNCATE.format(125), CANCEL]


# -- lifetime, errors, unknown messages -------------------------------------------------------


def test_session_expired_is_a_lifetime_event() -> None:
    message = {
        "type": "error",
        "event_id": "event_x",
        "error": {
            "type": "invalid_request_error",
            "code": "session_expired",
            "message": "Your session hit the maximum duration of 60 minutes.",
            "param": None,
            "event_id": None,
        },
    }
    [routed] = Session().feed(json.dumps(message))
    assert routed.stream == 0
    info = ErrorInfo(
        kind="timeout",
        message="Your session hit the maximum duration of 60 minutes.",
        code="session_expired",
        raw=message["error"],
    )
    assert routed.event == Lifetime(
        state="expired",
        reason="session_expired",
        max_duration=3600.0,
        message=info.message,
        error=info,
        extra=message,
    )


def test_provider_errors_are_typed_session_events() -> None:
    message = {
        "type": "error",
        "event_id": "event_y",
        "error": {
            "type": "invalid_request_error",
            "code": "conversation_already_has_active_response",
            "message": "Conversation already has an active response in progress: resp_1.",
            "param": None,
            "event_id": "client_7",
        },
    }
    [routed] = Session().feed(json.dumps(message))
    assert routed.stream == 0
    assert routed.event == ErrorEvent(
        error=ErrorInfo(
            kind="invalid_request",
            message=message["error"]["message"],
            code="conversation_already_has_active_response",
            raw=message["error"],
        ),
        extra=message,
    )


def test_protocol_errors_name_the_message_index() -> None:
    session = Session()
    good = json.dumps({"type": "input_audio_buffer.cleared", "event_id": "e"})
    assert [r.event for r in session.feed(good)] == [
        StatusUpdate(
            status="input_audio_buffer.cleared",
            extra={"type": "input_audio_buffer.cleared", "event_id": "e"},
        )
    ]
    [bad] = session.feed("{not json")
    assert isinstance(bad.event, ErrorEvent)
    assert (bad.event.error.kind, bad.event.error.event_index, bad.event.error.dialect) == (
        "protocol",
        1,
        "openai_realtime",
    )
    [array] = session.feed("[1]")
    assert isinstance(array.event, ErrorEvent)
    assert array.event.error.message == "message is a JSON list, not an object"
    assert array.event.error.event_index == 2
    delta = {
        "type": "response.output_text.delta",
        "event_id": "e",
        "response_id": "resp_9",
        "item_id": "i",
        "output_index": 0,
        "content_index": 0,
        "delta": "x",
    }
    [order] = session.feed(json.dumps(delta))
    assert isinstance(order.event, ErrorEvent)
    assert (
        order.event.error.message
        == "response.output_text.delta for response 'resp_9', which is not running"
    )
    assert order.event.error.event_index == 3
    strict = Session(strict=True)
    strict.feed(good)
    with pytest.raises(EventOrderError) as caught:
        strict.feed(json.dumps(delta))
    assert (caught.value.event_index, caught.value.dialect) == (1, "openai_realtime")
    with pytest.raises(BufferLimitExceeded) as too_big:
        Session(strict=True, max_message_size=10).feed(good)
    assert too_big.value.event_index == 0


def test_unknown_messages_pass_through_losslessly() -> None:
    session = Session()
    text = '{"type":"session.heartbeat","event_id":"e1","extra":{"a":[1,2]}}'
    [routed] = session.feed(text)
    assert routed == type(routed)(event=Unknown(name="session.heartbeat", data=text))
    _audio_turn(session)
    inside = '{"type":"response.new_thing","response_id":"resp_1","x":1}'
    [routed] = session.feed(inside)
    assert (routed.stream, routed.response_id, routed.event) == (
        1,
        "resp_1",
        Unknown(name="response.new_thing", data=inside),
    )
    with pytest.raises(RemoteProtocolError, match=r"unknown message type 'session\.heartbeat'"):
        Session(strict=True).feed(text)


def test_input_transcription_segments_failure_and_dtmf() -> None:
    session = Session()
    seg = {
        "type": "conversation.item.input_audio_transcription.segment",
        "event_id": "e1",
        "item_id": "it",
        "content_index": 0,
        "id": "seg_1",
        "text": "hello",
        "speaker": "A",
        "start": 0.5,
        "end": 1.25,
    }
    fail = {
        "type": "conversation.item.input_audio_transcription.failed",
        "event_id": "e2",
        "item_id": "it",
        "content_index": 0,
        "error": {
            "type": "transcription_error",
            "code": "audio_unintelligible",
            "message": "The audio could not be transcribed.",
            "param": None,
        },
    }
    dtmf = {
        "type": "input_audio_buffer.dtmf_event_received",
        "event": "5",
        "received_at": 1760000000,
    }
    got = [r.event for m in (seg, fail, dtmf) for r in session.feed(json.dumps(m))]
    assert got == [
        BlockStart(index=0, kind="transcript", id="it", extra=IMPLICIT),
        TranscriptSegment(
            index=0, text="hello", start=0.5, end=1.25, speaker="A", id="seg_1", extra=seg
        ),
        ErrorEvent(
            error=ErrorInfo(
                kind="unknown",
                message="The audio could not be transcribed.",
                code="audio_unintelligible",
                raw=fail["error"],
            ),
            extra=IMPLICIT,
        ),
        BlockEnd(index=0, status="failed", extra=fail),
        Metadata(name="dtmf", value="5", extra=dtmf),
    ]


def test_close_truncates_what_is_open() -> None:
    session = Session()
    _audio_turn(session, b"\x00\x00")
    session.feed(
        json.dumps(
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "event_id": "e",
                "item_id": "u",
                "content_index": 0,
                "delta": "h",
            }
        )
    )
    got = where(session.close())
    assert got == [
        (1, None, "resp_1", BlockEnd(index=0, extra=IMPLICIT)),
        (1, None, "resp_1", BlockEnd(index=1, extra=IMPLICIT)),
        (
            1,
            None,
            "resp_1",
            Finish(
                status="truncated",
                reason=FinishReason(unified="error"),
                error=ErrorInfo(
                    kind="truncated",
                    message="the connection closed before response resp_1 was done",
                    retryable=True,
                    dialect="openai_realtime",
                ),
                extra=IMPLICIT,
            ),
        ),
        (0, None, None, BlockEnd(index=0, status="truncated", extra=IMPLICIT)),
    ]
    with pytest.raises(LocalProtocolError, match="after close"):
        session.feed("{}")


def test_too_many_running_responses_is_a_buffer_limit() -> None:
    session = Session(max_responses=1, strict=True)
    session.feed(
        json.dumps({"type": "response.created", "event_id": "a", "response": {"id": "r1"}})
    )
    with pytest.raises(BufferLimitExceeded, match="max_responses=1"):
        session.feed(
            json.dumps({"type": "response.created", "event_id": "b", "response": {"id": "r2"}})
        )


# -- commands -------------------------------------------------------------------------------


def test_commands_exact_messages() -> None:
    s = Session()
    assert s.configure(instructions="Be brief.", audio={"output": {"voice": "marin"}}) == [
        '{"type":"session.update","session":{"type":"realtime","instructions":"Be brief.",'
        '"audio":{"output":{"voice":"marin"}}}}'
    ]
    assert s.configure({"type": "transcription"}) == [
        '{"type":"session.update","session":{"type":"transcription"}}'
    ]
    assert s.send_text("Hi") == [
        '{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}}',
        '{"type":"response.create"}',
    ]
    assert s.send_text("Hi", respond=False, role="system") == [
        '{"type":"conversation.item.create","item":{"type":"message","role":"system","content":[{"type":"input_text","text":"Hi"}]}}'
    ]
    assert s.send_audio(b"\x01\x02\x03") == ['{"type":"input_audio_buffer.append","audio":"AQID"}']
    assert s.send_audio(b"") == []
    assert s.commit_audio() == ['{"type":"input_audio_buffer.commit"}']
    assert s.clear_audio() == ['{"type":"input_audio_buffer.clear"}']
    assert s.append_item(
        {"type": "message", "role": "user", "content": []}, previous_item_id="root"
    ) == [
        '{"type":"conversation.item.create","previous_item_id":"root","item":{"type":"message","role":"user","content":[]}}'
    ]
    assert s.retrieve_item("i1") == ['{"type":"conversation.item.retrieve","item_id":"i1"}']
    assert s.delete_item("i1") == ['{"type":"conversation.item.delete","item_id":"i1"}']
    assert s.create_response(conversation="none", output_modalities=["text"]) == [
        '{"type":"response.create","response":{"conversation":"none","output_modalities":["text"]}}'
    ]
    assert s.cancel() == ['{"type":"response.cancel"}']
    assert s.cancel("resp_1") == [CANCEL]
    assert s.truncate("item_1", 1500) == [TRUNCATE.format(1500)]
    assert s.tool_result("call_w1", '{"temp":21}') == [
        '{"type":"conversation.item.create","item":{"type":"function_call_output","call_id":"call_w1","output":"{\\"temp\\":21}"}}',
        '{"type":"response.create"}',
    ]
    assert s.clear_output_audio() == ['{"type":"output_audio_buffer.clear"}']
    # Every message is valid JSON of a GA client type.
    assert json.loads(s.send_text("é")[0])["item"]["content"][0]["text"] == "é"


def test_send_audio_splits_at_the_append_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from polystream.dialects._realtime_api import commands

    monkeypatch.setattr(commands, "APPEND_LIMIT", 4)
    out = Session().send_audio(b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09")
    assert [json.loads(m)["audio"] for m in out] == ["AAECAw==", "BAUGBw==", "CAk="]
