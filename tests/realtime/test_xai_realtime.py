"""xAI Voice Agent: exact events of hand-written sessions (PCM at 16 kHz, transcripts so
far, function calls named by call id, a legacy name), binary audio messages both ways,
session resumption, lifetime, errors located by message, and the commands' messages."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from polystream.audio import PCM16_24K, AudioFormat
from polystream.dialects.xai_realtime.binding import Session
from polystream.errors import EventOrderError, LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    KeepAlive,
    Lifetime,
    MediaInfo,
    Metadata,
    Raw,
    SessionUpdate,
    Speech,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
)

from .helpers import FIXTURES, where

IMPLICIT = {"implicit": True}
BINARY = {"transport": "binary"}
PCM24 = MediaInfo(mime_type="audio/pcm", sample_rate=24000, channels=1)


def frames(name: str) -> list[str | bytes]:
    """The messages of ``tests/fixtures/xai_realtime/<name>.ws``: a ``binary:`` line is a
    binary message (its bytes base64 after the prefix), any other a text message."""
    lines = (FIXTURES / "xai_realtime" / f"{name}.ws").read_text(encoding="utf-8").splitlines()
    return [base64.b64decode(line[7:]) if line.startswith("binary:") else line for line in lines]


def parsed(messages: list[str | bytes]) -> list[Any]:
    return [json.loads(m) if isinstance(m, str) else m for m in messages]


def run(session: Session, messages: list[str | bytes]) -> list[Any]:
    return where([r for m in messages for r in session.feed(m)])


def msg(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_voice_turn_exact_events() -> None:
    lines = frames("voice_turn")
    p = parsed(lines)
    session = Session()
    got = run(session, lines)
    r, user, asst = "resp_9c1", "item_u1", "item_a1"
    pcm16k = MediaInfo(mime_type="audio/pcm", sample_rate=16000, channels=1)
    assert got == [
        (0, None, None, StatusUpdate(status="conversation.created", extra=p[0])),
        (
            0,
            None,
            None,
            SessionUpdate(
                status="updated",
                config=p[1]["session"],
                input_audio=pcm16k,
                output_audio=pcm16k,
                extra=p[1],
            ),
        ),
        (0, None, None, KeepAlive(name="ping", extra=p[2])),
        (0, None, None, Speech(state="started", item_id=user, extra=p[3])),
        (0, None, None, BlockStart(index=0, kind="transcript", id=user, extra=IMPLICIT)),
        (0, None, None, Metadata(name="interim_transcript", value="What's the", extra=p[4])),
        (0, None, None, Speech(state="stopped", item_id=user, extra=p[5])),
        (
            0,
            None,
            None,
            Metadata(name="interim_transcript", value="What's the weather", extra=p[6]),
        ),
        (0, None, None, StatusUpdate(status="input_audio_buffer.committed", extra=p[7])),
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[8])),
        (
            0,
            None,
            None,
            BlockEnd(index=0, status="completed", value="What's the weather like?", extra=p[9]),
        ),
        (1, None, r, StreamStart(dialect="xai_realtime", id=r, extra=p[10])),
        (1, None, r, StatusUpdate(status="in_progress", extra=p[11])),
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[12])),
        (1, None, r, BlockStart(index=0, kind="audio", id=asst, media=pcm16k, extra=p[13])),
        (1, None, r, BlockStart(index=1, kind="transcript", id=asst, extra=IMPLICIT)),
        # xAI's transcript deltas name no content part: the item's audio part.
        (1, None, r, TextDelta(index=1, delta="Sunny", extra=p[14])),
        (1, None, r, DataDelta(index=0, delta=p[15]["delta"], extra=p[15])),
        (1, None, r, TextDelta(index=1, delta=" and warm.", extra=p[16])),
        (1, None, r, DataDelta(index=0, delta=p[17]["delta"], extra=p[17])),
        (1, None, r, StatusUpdate(status="done", extra=p[18])),
        (1, None, r, StatusUpdate(status="done", extra=p[19])),
        (1, None, r, BlockEnd(index=0, extra=p[20])),
        (1, None, r, BlockEnd(index=1, value="Sunny and warm.", extra=IMPLICIT)),
        (1, None, r, StatusUpdate(status="completed", extra=p[21])),
        (
            1,
            None,
            r,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="completed"),
                # Stated beside the response (its own usage is null).
                usage=Usage(
                    input_tokens=142, output_tokens=38, total_tokens=180, raw=p[22]["usage"]
                ),
                extra=p[22],
            ),
        ),
    ]
    assert session.conversation_id == "conv_7f3a"
    assert session.resumption is True
    assert session.input_format == session.output_format == AudioFormat("pcm16", 16000)
    # 3200 + 1600 bytes of PCM at 16 kHz (32 bytes a millisecond).
    assert session.received_ms(asst) == 150.0
    assert session.barge_in(100) == [
        msg(
            {
                "type": "conversation.item.truncate",
                "item_id": asst,
                "content_index": 0,
                "audio_end_ms": 100,
            }
        )
    ]


def test_function_call_named_by_call_id_and_a_legacy_text_name() -> None:
    lines = frames("tool_call")
    p = parsed(lines)
    session = Session()
    got = run(session, lines)
    t, x = "resp_t1", "resp_x2"
    ulaw = MediaInfo(mime_type="audio/pcmu", sample_rate=8000, channels=1)
    alaw = MediaInfo(mime_type="audio/pcma", sample_rate=8000, channels=1)
    expired = ErrorInfo(
        kind="timeout",
        message="The session reached its maximum duration.",
        code="max_duration",
        raw=p[18]["error"],
    )
    assert got == [
        (
            0,
            None,
            None,
            SessionUpdate(
                status="created",
                config=p[0]["session"],
                input_audio=ulaw,
                output_audio=alaw,
                extra=p[0],
            ),
        ),
        (1, None, t, StreamStart(dialect="xai_realtime", id=t, extra=p[1])),
        (
            1,
            None,
            t,
            BlockStart(
                index=0,
                kind="tool_call",
                id="item_fc1",
                call_id="call_42",
                name="get_weather",
                extra=p[2],
            ),
        ),
        # Grok repeats conversation.item.added for a function call.
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[3])),
        (0, None, None, StatusUpdate(status="conversation.item.added", extra=p[4])),
        # No response_id, no item_id: the call id finds the response and the block.
        (1, None, t, ToolInputDelta(index=0, delta='{"city":', extra=p[5])),
        (1, None, t, ToolInputDelta(index=0, delta='"Paris"}', extra=p[6])),
        (1, None, t, StatusUpdate(status="done", extra=p[7])),
        (1, None, t, BlockEnd(index=0, status="completed", value='{"city":"Paris"}', extra=p[8])),
        (
            1,
            None,
            t,
            Finish(
                status="completed",
                reason=FinishReason(unified="tool_calls", raw="completed"),
                usage=Usage(
                    input_tokens=88,
                    output_tokens=12,
                    total_tokens=100,
                    raw=p[9]["response"]["usage"],
                ),
                extra=p[9],
            ),
        ),
        (2, None, x, StreamStart(dialect="xai_realtime", id=x, extra=p[10])),
        (2, None, x, StatusUpdate(status="in_progress", extra=p[11])),
        (2, None, x, BlockStart(index=0, kind="text", id="item_x1", extra=p[12])),
        (
            2,
            None,
            x,
            TextDelta(
                index=0,
                delta="It is 21 degrees",
                part=0,
                extra={**p[13], "retired_beta": "response.output_text.delta"},
            ),
        ),
        (2, None, x, TextDelta(index=0, delta=" in Paris.", part=0, extra=p[14])),
        (2, None, x, BlockEnd(index=0, value="It is 21 degrees in Paris.", extra=p[15])),
        (2, None, x, StatusUpdate(status="completed", extra=p[16])),
        (
            2,
            None,
            x,
            Finish(
                status="completed",
                reason=FinishReason(unified="stop", raw="completed"),
                extra=p[17],
            ),
        ),
        (
            0,
            None,
            None,
            Lifetime(
                state="expired",
                reason="max_duration",
                max_duration=7200.0,
                message=expired.message,
                error=expired,
                extra=p[18],
            ),
        ),
    ]
    assert session.input_format == AudioFormat("pcmu", 8000)
    assert session.active_responses == []


def test_binary_transport_audio_both_ways() -> None:
    lines = frames("binary_transport")
    p = parsed(lines)
    session = Session()
    assert session.send_audio(b"\x01\x00") == [
        msg({"type": "input_audio_buffer.append", "audio": "AQA="})
    ]
    got = run(session, lines)
    r, item = "resp_b1", "item_b1"
    pcm24 = MediaInfo(mime_type="audio/pcm", sample_rate=24000, channels=1)
    pcm48 = MediaInfo(mime_type="audio/pcm", sample_rate=48000, channels=1)
    assert got == [
        (
            0,
            None,
            None,
            SessionUpdate(
                status="updated",
                config=p[0]["session"],
                input_audio=pcm48,
                output_audio=pcm24,
                extra=p[0],
            ),
        ),
        (1, None, r, StreamStart(dialect="xai_realtime", id=r, extra=p[1])),
        (1, None, r, StatusUpdate(status="in_progress", extra=p[2])),
        (1, None, r, BlockStart(index=0, kind="audio", id=item, media=pcm24, extra=p[3])),
        (1, None, r, BlockStart(index=1, kind="transcript", id=item, extra=IMPLICIT)),
        # A binary message is the audio of the part open, base64 as a DataDelta.
        (1, None, r, DataDelta(index=0, delta=base64.b64encode(p[4]).decode(), extra=BINARY)),
        (1, None, r, TextDelta(index=1, delta="Hello!", extra=p[5])),
        (1, None, r, DataDelta(index=0, delta=base64.b64encode(p[6]).decode(), extra=BINARY)),
        (1, None, r, StatusUpdate(status="done", extra=p[7])),
        (1, None, r, BlockEnd(index=0, extra=p[8])),
        (1, None, r, BlockEnd(index=1, value="Hello!", extra=IMPLICIT)),
        (1, None, r, StatusUpdate(status="completed", extra=p[9])),
        (
            1,
            None,
            r,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="cancelled", raw="turn_detected"),
                extra=p[10],
            ),
        ),
    ]
    assert p[4] == bytes([3, 0]) * 2400 and p[6] == bytes([5, 0]) * 1200
    # The server stated binary input: audio goes as bytes messages now.
    assert (session.input_transport, session.output_transport) == ("binary", "binary")
    assert session.send_audio(b"\x01\x00\x02\x00") == [b"\x01\x00\x02\x00"]
    # 4800 + 2400 bytes of PCM at 24 kHz, counted for barge-in.
    assert session.received_ms(item) == 150.0


def test_binary_audio_without_an_audio_part_opens_a_block_of_its_own() -> None:
    session = Session(keep_raw=True)
    created = msg({"type": "response.created", "response": {"id": "r1"}})
    session.feed(created)
    first = session.feed(b"\x00\x01")
    assert where(first) == [
        (0, None, None, Raw(dialect="xai_realtime", data=b"\x00\x01")),
        (1, None, "r1", BlockStart(index=0, kind="audio", media=PCM24, extra=IMPLICIT)),
        (1, None, "r1", DataDelta(index=0, delta="AAE=", extra=BINARY)),
    ]
    second = session.feed(b"\x02\x03")
    assert [r.event for r in second][1:] == [DataDelta(index=0, delta="AgM=", extra=BINARY)]
    done = msg({"type": "response.done", "response": {"id": "r1", "status": "completed"}})
    assert [r.event for r in session.feed(done)][1:] == [
        BlockEnd(index=0, extra=IMPLICIT),
        Finish(
            status="completed",
            reason=FinishReason(unified="stop", raw="completed"),
            extra=json.loads(done),
        ),
    ]
    # No item: nothing to truncate at barge-in.
    assert session.received_ms() == 0.0


def test_binary_audio_with_no_response_running_is_a_located_protocol_error() -> None:
    session = Session()
    session.feed(msg({"type": "ping", "timestamp": 1}))
    [routed] = session.feed(b"\x00\x00")
    assert routed.stream == 0 and isinstance(routed.event, ErrorEvent)
    assert routed.event.error == ErrorInfo(
        kind="protocol",
        message="binary audio of 2 bytes with no response running",
        dialect="xai_realtime",
        event_index=1,
    )
    with pytest.raises(RemoteProtocolError) as caught:
        Session(strict=True).feed(b"\x00\x00")
    assert caught.value.event_index == 0 and caught.value.dialect == "xai_realtime"


def test_a_call_no_response_added_is_an_order_error_at_its_index() -> None:
    session = Session(strict=True)
    session.feed(msg({"type": "response.created", "response": {"id": "r1"}}))
    delta = msg({"type": "response.function_call_arguments.delta", "call_id": "nope", "delta": "{"})
    with pytest.raises(EventOrderError) as caught:
        session.feed(delta)
    assert caught.value.event_index == 1
    assert "call 'nope', never added" in caught.value.message


def test_timeout_error_is_the_session_s_end_and_others_are_errors() -> None:
    session = Session()
    timeout = {"type": "error", "error": {"type": "timeout", "message": "idle too long"}}
    other = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad voice"}}
    got = [r.event for m in (timeout, other) for r in session.feed(msg(m))]
    lost = ErrorInfo(kind="timeout", message="idle too long", code="timeout", raw=timeout["error"])
    assert got == [
        Lifetime(
            state="expired",
            reason="timeout",
            max_duration=7200.0,
            message="idle too long",
            error=lost,
            extra=timeout,
        ),
        ErrorEvent(
            error=ErrorInfo(
                kind="invalid_request",
                message="bad voice",
                code="invalid_request_error",
                raw=other["error"],
            ),
            extra=other,
        ),
    ]


def test_an_interim_transcript_left_open_is_truncated_at_close() -> None:
    session = Session()
    updated = {
        "type": "conversation.item.input_audio_transcription.updated",
        "item_id": "u",
        "transcript": "Hel",
    }
    assert [r.event for r in session.feed(msg(updated))] == [
        BlockStart(index=0, kind="transcript", id="u", extra=IMPLICIT),
        Metadata(name="interim_transcript", value="Hel", extra=updated),
    ]
    assert [r.event for r in session.close()] == [
        BlockEnd(index=0, status="truncated", extra=IMPLICIT)
    ]


def test_commands_exact_messages() -> None:
    s = Session()
    assert s.configure(instructions="Be brief.", voice="eve", resumption=True) == [
        msg(
            {
                "type": "session.update",
                "session": {
                    "instructions": "Be brief.",
                    "voice": "eve",
                    "resumption": {"enabled": True},
                },
            }
        )
    ]
    assert s.resumption is True
    assert s.send_text("Hi") == [
        msg(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Hi"}],
                },
            }
        ),
        msg({"type": "response.create"}),
    ]
    assert s.force_message("One moment.", interruptible=False, voice="rex") == [
        msg(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "force_message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "One moment."}],
                    "interruptible": False,
                    "voice": "rex",
                },
            }
        )
    ]
    assert s.force_message("Hello.") == [
        msg(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "force_message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hello."}],
                },
            }
        )
    ]
    assert s.tool_result("call_42", '{"t":21}') == [
        msg(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "function_call_output",
                    "call_id": "call_42",
                    "output": '{"t":21}',
                },
            }
        ),
        msg({"type": "response.create"}),
    ]
    assert s.commit_audio() == [msg({"type": "input_audio_buffer.commit"})]
    assert s.clear_audio() == [msg({"type": "input_audio_buffer.clear"})]
    assert s.delete_item("i") == [msg({"type": "conversation.item.delete", "item_id": "i"})]
    assert s.cancel() == [msg({"type": "response.cancel"})]
    # The client's own choice of binary input applies to the audio sent after it.
    assert s.send_audio(b"\x00\x00") == [
        msg({"type": "input_audio_buffer.append", "audio": "AAA="})
    ]
    s.configure(
        audio={"input": {"format": {"type": "audio/pcm", "rate": 24000}, "transport": "binary"}}
    )
    assert s.send_audio(b"\x00\x00") == [b"\x00\x00"]
    for unsupported in (lambda: s.retrieve_item("i"), s.clear_output_audio):
        with pytest.raises(LocalProtocolError) as caught:
            unsupported()
        assert caught.value.dialect == "xai_realtime"
    assert s.output_format == PCM16_24K
