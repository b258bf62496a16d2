"""The official openai SDK's Realtime client (``client.realtime.connect``) against the
emulator over loopback: the session, a text turn, an audio turn (the tone's exact
bytes), a function call and its result, barge-in, voice activity, the socket faults, and
the handshake's refusals. polystream's own Realtime session reads the same messages."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
import websockets.sync.client
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus

from polystream.audio import ulaw_encode
from polystream.dialects._realtime_api.session import RealtimeAPISession
from polystream.events import (
    BlockStart,
    DataDelta,
    Finish,
    Speech,
    StreamStart,
    TextDelta,
    ToolInputDelta,
)
from polystream.realtime import open_session
from polystream.scenario import Emulator
from polystream.scenario._media import tone
from polystream.server import ServerThread
from tests.server.support import track

ANSWER = "Emulated reply from gpt-realtime. You said: Hello there"


def realtime(server: ServerThread) -> openai.OpenAI:
    return track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1", max_retries=0))


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerThread]:
    with ServerThread(Emulator()) as server:
        yield server


def session() -> RealtimeAPISession:
    made = open_session("openai_realtime", strict=True)
    assert isinstance(made, RealtimeAPISession)
    return made


def until(conn: Any, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Read messages up to the first for which ``done`` holds (included)."""
    out = []
    while True:
        message = json.loads(conn.recv_bytes())
        out.append(message)
        if done(message):
            return out


def response_done(message: dict[str, Any]) -> bool:
    return bool(message["type"] == "response.done")


def feed(state: RealtimeAPISession, messages: list[dict[str, Any]]) -> list[Any]:
    events = []
    for message in messages:
        events += [routed.event for routed in state.feed(json.dumps(message))]
    return events


def test_session_created_then_updated(plain: ServerThread) -> None:
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        created = conn.recv()
        assert created.type == "session.created"
        config = json.loads(created.to_json())["session"]
        assert config["model"] == "gpt-realtime"
        assert config["output_modalities"] == ["audio"]
        assert config["audio"]["input"]["turn_detection"] == {
            "type": "server_vad",
            "threshold": 0.5,
            "prefix_padding_ms": 300,
            "silence_duration_ms": 200,
            "idle_timeout_ms": None,
            "create_response": True,
            "interrupt_response": True,
        }
        conn.session.update(
            session={
                "type": "realtime",
                "instructions": "Be brief.",
                "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None}},
            }
        )
        updated = json.loads(conn.recv_bytes())
    assert updated["type"] == "session.updated"
    session_object = updated["session"]
    assert session_object["id"] == config["id"]
    assert session_object["instructions"] == "Be brief."
    assert session_object["output_modalities"] == ["text"]
    assert session_object["audio"]["input"]["turn_detection"] is None
    assert session_object["audio"]["output"] == config["audio"]["output"]


def test_text_turn_events_and_text(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for text in state.send_text("Hello there"):
            conn.send_raw(text)
        messages = until(conn, response_done)
    kinds = [m["type"] for m in messages]
    deltas = ["Emulated", " reply", " from", " gpt-realtime.", " You", " said:", " Hello", " there"]
    assert kinds == [
        "session.created",
        "session.updated",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * len(deltas),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert [m["delta"] for m in messages if m["type"] == "response.output_text.delta"] == deltas
    user = messages[2]["item"]
    assert user["role"] == "user"
    assert user["content"] == [{"type": "input_text", "text": "Hello there"}]
    done = messages[-1]["response"]
    assert done["status"] == "completed"
    assert done["conversation_id"] is not None
    assert done["output"] == [
        {
            "id": messages[6]["item"]["id"],
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": ANSWER}],
        }
    ]
    assert done["usage"] == {
        "total_tokens": 28,
        "input_tokens": 11,
        "output_tokens": 17,
        "input_token_details": {
            "text_tokens": 11,
            "audio_tokens": 0,
            "image_tokens": 0,
            "cached_tokens": 0,
        },
        "output_token_details": {"text_tokens": 17, "audio_tokens": 0},
    }
    events = feed(state, messages)
    reply = [e for e in events if isinstance(e, StreamStart | TextDelta | BlockStart | Finish)]
    assert isinstance(reply[0], StreamStart) and reply[0].id == done["id"]
    assert "".join(e.delta for e in reply if isinstance(e, TextDelta)) == ANSWER
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.unified) == ("completed", "stop")
    assert finish.usage is not None and finish.usage.output_tokens == 17


def test_audio_turn_is_the_tone_of_the_transcript(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        for text in state.send_text("Hello there"):
            conn.send_raw(text)
        messages = until(conn, response_done)
    audio = b"".join(
        base64.b64decode(m["delta"]) for m in messages if m["type"] == "response.output_audio.delta"
    )
    transcript = "".join(
        m["delta"] for m in messages if m["type"] == "response.output_audio_transcript.delta"
    )
    assert transcript == ANSWER
    assert audio == tone(ANSWER)  # PCM16, 24 kHz: 50 ms a character
    assert len(audio) == len(ANSWER) * 50 * 48
    chunks = [m for m in messages if m["type"] == "response.output_audio.delta"]
    assert len(chunks) == len(audio) // 4800 + (1 if len(audio) % 4800 else 0)
    done = messages[-1]["response"]
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": ANSWER}]
    assert done["audio"] == {
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}
    }
    assert done["usage"]["output_token_details"] == {
        "text_tokens": 17,
        "audio_tokens": 69,  # 2.75 s at 25 tokens a second, rounded up
    }
    feed(state, messages)
    assert state.received_ms() == len(ANSWER) * 50


def test_audio_turn_in_g711(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(
            session={"type": "realtime", "audio": {"output": {"format": {"type": "audio/pcmu"}}}}
        )
        for text in state.send_text("Hello there"):
            conn.send_raw(text)
        messages = until(conn, response_done)
    events = feed(state, messages)
    audio = b"".join(base64.b64decode(e.delta) for e in events if isinstance(e, DataDelta))
    assert audio == ulaw_encode(tone(ANSWER, rate=8000))
    start = next(e for e in events if isinstance(e, BlockStart) and e.kind == "audio")
    assert start.media is not None and start.media.mime_type == "audio/pcmu"
    assert state.received_ms() == len(ANSWER) * 50


WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TOOL_SCENARIOS = [
    {
        "match": {"tools": True, "tool_result": False},
        "reply": {
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_w1"}]
        },
    },
    {"match": {"tool_result": True}, "reply": {"text": ["It is 18 °C", " and sunny."]}},
]


def test_function_call_then_its_result(serve: Callable[..., ServerThread]) -> None:
    server = serve(TOOL_SCENARIOS)
    state = session()
    with realtime(server).realtime.connect(model="gpt-realtime") as conn:
        for text in state.configure(output_modalities=["text"], tools=[WEATHER_TOOL]):
            conn.send_raw(text)
        for text in state.send_text("Weather in Paris?"):
            conn.send_raw(text)
        first = until(conn, response_done)
        for text in state.tool_result("call_w1", '{"temp": 18}'):
            conn.send_raw(text)
        second = until(conn, response_done)
    events = feed(state, first)
    call = next(e for e in events if isinstance(e, BlockStart))
    assert (call.kind, call.name, call.call_id) == ("tool_call", "get_weather", "call_w1")
    arguments = "".join(e.delta for e in events if isinstance(e, ToolInputDelta))
    assert arguments == '{"city":"Paris"}'
    assert [m["delta"] for m in first if m["type"] == "response.function_call_arguments.delta"] == [
        '{"city":"Paris"}'
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason.unified == "tool_calls"
    assert first[-1]["response"]["output"][0] == {
        "id": call.id,
        "type": "function_call",
        "status": "completed",
        "name": "get_weather",
        "call_id": "call_w1",
        "arguments": '{"city":"Paris"}',
    }
    output_item = second[0]["item"]
    assert (output_item["type"], output_item["call_id"]) == ("function_call_output", "call_w1")
    events = feed(state, second)
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "It is 18 °C and sunny."
    assert isinstance(events[-1], Finish) and events[-1].reason.unified == "stop"


STORY = {
    "match": {"contains": "story"},
    "reply": {"text": "Once upon a time there was a tone."},
}


def test_barge_in_truncates_at_what_was_played(serve: Callable[..., ServerThread]) -> None:
    # The user speaks after 12 messages of the reply; the reply waits (no VAD cut) and
    # the client stops it: truncate at what it played, cancel.
    scenario = {**STORY, "faults": {"interrupt": {"after": 12, "cancel": False, "pause": 30}}}
    server = serve([scenario])
    state = session()
    sent: list[str] = []
    with realtime(server).realtime.connect(model="gpt-realtime") as conn:
        for text in state.send_text("Tell me a story"):
            conn.send_raw(text)
        before = until(conn, lambda m: m["type"] == "input_audio_buffer.speech_started")
        events = feed(state, before)
        assert isinstance(events[-1], Speech) and events[-1].state == "started"
        assert state.received_ms() == 400.0  # four 100 ms deltas so far
        sent = state.barge_in(played_ms=150.0)
        for text in sent:
            conn.send_raw(text)
        after = until(conn, response_done)
    assert [m["type"] for m in before[:7]] == [
        "session.created",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
    ]
    item = before[5]["item"]["id"]
    assert [json.loads(text) for text in sent] == [
        {
            "type": "conversation.item.truncate",
            "item_id": item,
            "content_index": 0,
            "audio_end_ms": 150,
        },
        {"type": "response.cancel", "response_id": before[3]["response"]["id"]},
    ]
    assert [m["type"] for m in after] == [
        "conversation.item.truncated",
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert {k: after[0][k] for k in ("item_id", "content_index", "audio_end_ms")} == {
        "item_id": item,
        "content_index": 0,
        "audio_end_ms": 150,
    }
    done = after[-1]["response"]
    assert done["status"] == "cancelled"
    assert done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert done["output"][0]["status"] == "incomplete"
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": ""}]
    finish = feed(state, after)[-1]
    assert isinstance(finish, Finish)
    assert (finish.status, finish.reason.unified, finish.reason.raw) == (
        "incomplete",
        "cancelled",
        "client_cancelled",
    )


def test_barge_in_after_the_server_cut_the_reply(serve: Callable[..., ServerThread]) -> None:
    # Server VAD cuts the reply itself: by the time the client's cancel arrives nothing
    # runs, and the service answers response_cancel_not_active.
    server = serve([{**STORY, "faults": {"interrupt": {"after": 12}}}])
    state = session()
    with realtime(server).realtime.connect(model="gpt-realtime") as conn:
        for text in state.send_text("Tell me a story"):
            conn.send_raw(text)
        before = until(conn, lambda m: m["type"] == "input_audio_buffer.speech_started")
        feed(state, before)
        for text in state.barge_in(played_ms=1000.0):  # (clamped to the 400 ms received)
            conn.send_raw(text)
        after = until(conn, lambda m: m["type"] == "error")
    assert [m["type"] for m in after] == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "conversation.item.truncated",
        "error",
    ]
    assert after[5]["response"]["status_details"] == {
        "type": "cancelled",
        "reason": "turn_detected",
    }
    assert after[6]["audio_end_ms"] == 400
    assert after[7]["error"] == {
        "type": "invalid_request_error",
        "code": "response_cancel_not_active",
        "message": "Cancellation failed: no active response found",
        "param": None,
        "event_id": None,
    }


def test_truncate_past_the_audio_made_is_refused(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        for text in state.send_text("Hello there"):
            conn.send_raw(text)
        messages = until(conn, response_done)
        item = messages[-1]["response"]["output"][0]["id"]
        for text in state.truncate(item, 9000):
            conn.send_raw(text)
        refused = json.loads(conn.recv_bytes())
    assert refused["error"] == {
        "type": "invalid_request_error",
        "code": "invalid_value",
        "message": f"Audio content of {len(ANSWER) * 50}ms is already shorter than 9000ms",
        "param": "audio_end_ms",
        "event_id": None,
    }


def test_server_vad_turns_spoken_audio_into_a_turn(plain: ServerThread) -> None:
    state = session()
    speech = tone("a question", seconds=0.5) + bytes(48 * 300)  # then 300 ms of silence
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for text in state.send_audio(speech):
            conn.send_raw(text)
        messages = until(conn, response_done)
    kinds = [m["type"] for m in messages]
    assert kinds[:8] == [
        "session.created",
        "session.updated",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
    ]
    started, stopped = messages[2], messages[3]
    assert started["audio_start_ms"] == 0  # (speech at 0 ms, less the 300 ms of padding)
    assert stopped["audio_end_ms"] == 700  # 500 ms of speech, then 200 ms of silence
    assert started["item_id"] == stopped["item_id"] == messages[4]["item_id"]
    assert messages[5]["item"]["content"] == [{"type": "input_audio", "transcript": None}]
    text = "".join(m["delta"] for m in messages if m["type"] == "response.output_text.delta")
    assert text == "Emulated reply from gpt-realtime."
    events = feed(state, messages)
    assert [e.state for e in events if isinstance(e, Speech)] == ["started", "stopped"]


def test_manual_commit_and_its_errors(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        for text in state.commit_audio():
            conn.send_raw(text)
        for text in state.send_audio(tone("short", seconds=0.25)):
            conn.send_raw(text)
        for text in state.commit_audio():
            conn.send_raw(text)
        messages = until(conn, lambda m: m["type"] == "conversation.item.done")
    assert [m["type"] for m in messages] == [
        "session.created",
        "session.updated",
        "error",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    assert messages[2]["error"]["code"] == "input_audio_buffer_commit_empty"
    assert messages[2]["error"]["message"] == (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of "
        "audio, but buffer only has 0.00ms of audio."
    )
    assert messages[3]["item_id"] == messages[4]["item"]["id"]


def test_out_of_band_response(plain: ServerThread) -> None:
    state = session()
    with realtime(plain).realtime.connect(model="gpt-realtime") as conn:
        for text in state.create_response(
            conversation="none",
            output_modalities=["text"],
            metadata={"topic": "classify"},
            input=[
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Is this spam?"}],
                }
            ],
        ):
            conn.send_raw(text)
        messages = until(conn, response_done)
    kinds = [m["type"] for m in messages]
    assert not any(kind.startswith("conversation.") for kind in kinds)
    done = messages[-1]["response"]
    assert (done["conversation_id"], done["metadata"]) == (None, {"topic": "classify"})
    assert done["output"][0]["content"][0]["text"] == (
        "Emulated reply from gpt-realtime. You said: Is this spam?"
    )


def test_unknown_model_is_an_error_then_a_close(plain: ServerThread) -> None:
    with realtime(plain).realtime.connect(model="not-a-model") as conn:
        error = json.loads(conn.recv_bytes())
        with pytest.raises(ConnectionClosedError) as closed:
            conn.recv_bytes()
    assert error["type"] == "error"
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "model_not_found",
        "message": "The model `not-a-model` does not exist or you do not have access to it.",
        "param": None,
        "event_id": None,
    }
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_a_connection_without_a_key_is_refused_401(plain: ServerThread) -> None:
    url = plain.base_url.replace("http", "ws") + "/openai/v1/realtime?model=gpt-realtime"
    with pytest.raises(InvalidStatus) as refused:
        websockets.sync.client.connect(url)
    response = refused.value.response
    assert response.status_code == 401
    assert json.loads(response.body)["error"]["code"] == "invalid_api_key"


def test_a_browser_key_in_the_subprotocols_is_accepted(plain: ServerThread) -> None:
    url = plain.base_url.replace("http", "ws") + "/openai/v1/realtime?model=gpt-realtime"
    with websockets.sync.client.connect(
        url,
        subprotocols=["realtime", "openai-insecure-api-key.ek_123"],  # type: ignore[list-item]
    ) as ws:
        assert ws.subprotocol == "realtime"
        assert json.loads(ws.recv())["type"] == "session.created"


def test_an_unknown_socket_path_is_refused_404(plain: ServerThread) -> None:
    url = plain.base_url.replace("http", "ws") + "/openai/v1/nowhere"
    with pytest.raises(InvalidStatus) as refused:
        websockets.sync.client.connect(url, additional_headers={"Authorization": "Bearer x"})
    assert refused.value.response.status_code == 404


def test_close_fault_closes_the_socket_with_its_code(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"close": {"after": 3, "code": 1011, "reason": "boom"}}}])
    with realtime(server).realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        conn.response.create()
        kinds = [json.loads(conn.recv_bytes())["type"] for _ in range(5)]
        with pytest.raises(ConnectionClosedError) as closed:
            conn.recv_bytes()
    assert kinds == [
        "session.created",
        "session.updated",
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
    ]
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, "boom")


def test_session_expired_then_close_1001(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"expire_after": 0.0}}])
    state = session()
    with realtime(server).realtime.connect(model="gpt-realtime") as conn:
        messages = [json.loads(conn.recv_bytes()) for _ in range(2)]
        with pytest.raises(ConnectionClosed) as closed:
            conn.recv_bytes()
    assert [m["type"] for m in messages] == ["session.created", "error"]
    assert messages[1]["error"]["code"] == "session_expired"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    lifetime = feed(state, messages)[-1]
    assert (type(lifetime).__name__, lifetime.state, lifetime.max_duration) == (
        "Lifetime",
        "expired",
        3600.0,
    )


def test_the_async_client_reads_a_text_turn(plain: ServerThread) -> None:
    async def main() -> list[dict[str, Any]]:
        client = openai.AsyncOpenAI(
            api_key="x", base_url=plain.base_url + "/openai/v1", max_retries=0
        )
        try:
            async with client.realtime.connect(model="gpt-realtime") as conn:
                await conn.session.update(
                    session={"type": "realtime", "output_modalities": ["text"]}
                )
                await conn.conversation.item.create(
                    item={
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Hello there"}],
                    }
                )
                await conn.response.create()
                out = []
                async for event in conn:
                    out.append(json.loads(event.to_json()))
                    if event.type == "response.done":
                        return out
        finally:
            await client.close()
        raise AssertionError("the connection ended before response.done")

    messages = asyncio.run(main())
    text = "".join(m["delta"] for m in messages if m["type"] == "response.output_text.delta")
    assert text == ANSWER
    assert messages[-1]["response"]["status"] == "completed"
