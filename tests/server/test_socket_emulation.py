"""The emulated WebSocket connections without a socket: the time is given, so the
timing faults are checked to the exact second, and every server message is checked as
the client would read it."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
import websockets.sync.client

from polystream.audio import ulaw_encode
from polystream.realtime import open_session
from polystream.scenario import Emulator, ScenarioError, parse_scenarios
from polystream.scenario._media import tone
from polystream.scenario._sockets import SocketEmulation
from polystream.server import ServerThread, create_app
from tests.server.support import OwnServer

MODEL = "gpt-realtime"


def realtime(scenarios: list[dict[str, Any]] | None = None, **query: str) -> SocketEmulation:
    emulation = SocketEmulation(
        Emulator(parse_scenarios(scenarios or [])),
        "openai_realtime",
        query={"model": MODEL, **query},
        created=1_000,
    )
    emulation.start(0.0)
    return emulation


def send(emulation: SocketEmulation, now: float, *messages: Any) -> None:
    for message in messages:
        emulation.receive(message if isinstance(message, str) else json.dumps(message), now)


def due(emulation: SocketEmulation, now: float) -> list[dict[str, Any]]:
    return [json.loads(s.text) for s in emulation.due(now) if s.text is not None]


def timeline(emulation: SocketEmulation, limit: int = 500) -> list[tuple[float, str]]:
    """Every message until nothing is due any more, with the time it left."""
    out: list[tuple[float, str]] = []
    while limit:
        limit -= 1
        wake = emulation.wake
        if wake is None:
            return out
        out += [(round(wake, 6), m["type"]) for m in due(emulation, wake)]
    raise AssertionError("the emulation never went quiet")


TEXT_ONLY = {
    "type": "session.update",
    "session": {"type": "realtime", "output_modalities": ["text"]},
}
ASK = {"type": "response.create"}


def test_first_event_and_delay_time_each_message() -> None:
    emulation = realtime(
        [{"reply": {"text": ["a", "b"]}, "timing": {"first_event": 0.5, "delay": 0.25}}]
    )
    send(emulation, 1.0, TEXT_ONLY, ASK)
    assert [m["type"] for m in due(emulation, 1.0)] == ["session.created", "session.updated"]
    assert emulation.wake == 1.5
    assert due(emulation, 1.49) == []
    times = timeline(emulation)
    assert times == [
        (1.5, "response.created"),
        (1.75, "rate_limits.updated"),
        (2.0, "response.output_item.added"),
        (2.25, "conversation.item.added"),
        (2.5, "response.content_part.added"),
        (2.75, "response.output_text.delta"),
        (3.0, "response.output_text.delta"),
        (3.25, "response.output_text.done"),
        (3.5, "response.content_part.done"),
        (3.75, "response.output_item.done"),
        (4.0, "conversation.item.done"),
        (4.25, "response.done"),
    ]


def test_audio_delay_and_bursts_pace_the_audio() -> None:
    # 0.35 s of audio in 0.1 s deltas (4800 bytes): four deltas, in bursts of two.
    scenario = {
        "reply": {"text": "x", "audio": {"seconds": 0.35}},
        "timing": {"audio_delay": 0.1, "audio_burst": 2},
    }
    emulation = realtime([scenario])
    send(emulation, 0.0, {"type": "response.create", "response": {"conversation": "none"}})
    times = [(0.0, m["type"]) for m in due(emulation, 0.0)] + timeline(emulation)
    audio = [(at, kind[len("response.output_audio") :]) for at, kind in times if "audio" in kind]
    assert audio == [
        (0.0, "_transcript.delta"),  # ("x")
        (0.0, ".delta"),
        (0.0, ".delta"),
        (0.1, ".delta"),
        (0.1, ".delta"),
        (0.2, ".done"),  # (after the second burst)
        (0.2, "_transcript.done"),
    ]


def test_recorded_offsets_from_the_request() -> None:
    emulation = realtime([{"reply": {"text": ["a"]}, "timing": {"recorded": [0.1, 0.1, 0.4]}}])
    send(emulation, 2.0, TEXT_ONLY, ASK)
    due(emulation, 2.0)
    assert timeline(emulation)[:5] == [
        (2.1, "response.created"),
        (2.1, "rate_limits.updated"),
        (2.4, "response.output_item.added"),
        (2.4, "conversation.item.added"),  # (then no delay)
        (2.4, "response.content_part.added"),
    ]


def test_interrupt_pauses_the_reply_until_the_client_cancels() -> None:
    scenario = {
        "reply": {"text": "one two"},
        "faults": {"interrupt": {"after": 2, "cancel": False, "pause": 5}},
    }
    emulation = realtime([scenario])
    send(emulation, 0.0, TEXT_ONLY, ASK)
    messages = due(emulation, 0.0)
    assert [m["type"] for m in messages][-3:] == [
        "response.created",
        "rate_limits.updated",
        "input_audio_buffer.speech_started",
    ]
    assert messages[-1]["audio_start_ms"] == 0
    assert emulation.wake == 5.0
    send(emulation, 1.0, {"type": "response.cancel"})
    cancelled = due(emulation, 1.0)
    assert [m["type"] for m in cancelled] == ["response.done"]
    assert cancelled[0]["response"]["status_details"] == {
        "type": "cancelled",
        "reason": "client_cancelled",
    }
    assert emulation.wake is None


def test_expire_goes_after_what_was_due_before_it() -> None:
    emulation = realtime(
        [{"reply": {"text": ["a"]}, "timing": {"delay": 1.0}, "faults": {"expire_after": 2.5}}]
    )
    send(emulation, 0.0, TEXT_ONLY, ASK)
    sends = emulation.due(10.0)
    kinds = [json.loads(s.text)["type"] if s.text else f"close {s.close}" for s in sends]
    assert kinds == [
        "session.created",
        "session.updated",
        "response.created",
        "rate_limits.updated",  # at 1.0
        "response.output_item.added",  # at 2.0
        "error",  # at 2.5
        "close 1001",
    ]
    assert json.loads(sends[5].text or "")["error"]["message"] == (
        "Your session hit the maximum duration of 60 minutes."
    )
    assert emulation.closed and emulation.wake is None


def test_in_band_error_fails_the_response() -> None:
    emulation = realtime(
        [{"reply": {"text": ["a", "b"]}, "faults": {"error": {"after": 6, "kind": "server"}}}]
    )
    send(emulation, 0.0, TEXT_ONLY, ASK)
    messages = due(emulation, 0.0)[2:]
    assert [m["type"] for m in messages] == [
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    done = messages[-1]["response"]
    assert done["status"] == "failed"
    assert done["status_details"] == {
        "type": "failed",
        "error": {"type": "server_error", "code": None, "message": "Overloaded"},
    }
    assert done["output"][0]["status"] == "incomplete"
    assert done["output"][0]["content"] == [{"type": "output_text", "text": "a"}]


def test_http_error_refuses_the_response_with_an_error() -> None:
    emulation = realtime([{"faults": {"http_error": {"status": 429, "times": 1}}}])
    send(emulation, 0.0, TEXT_ONLY, ASK)
    assert due(emulation, 0.0)[-1]["error"] == {
        "type": "requests",
        "code": "rate_limit_exceeded",
        "message": "Rate limit exceeded. Please retry after the time given in Retry-After.",
        "param": None,
        "event_id": None,
    }
    send(emulation, 0.0, ASK)
    assert due(emulation, 0.0)[-1]["type"] == "response.done"  # (only the first failed)


def test_a_second_response_waits_for_the_first() -> None:
    emulation = realtime([{"reply": {"text": ["a"]}, "timing": {"first_event": 1.0}}])
    send(emulation, 0.0, TEXT_ONLY, ASK, ASK)
    error = due(emulation, 0.0)[-1]["error"]
    assert error["code"] == "conversation_already_has_active_response"
    assert error["message"].startswith(
        "Conversation already has an active response in progress: resp_"
    )
    # Out of band, one may run beside it.
    send(emulation, 0.0, {"type": "response.create", "response": {"conversation": "none"}})
    kinds = [kind for _, kind in timeline(emulation)]
    assert kinds.count("response.created") == 2
    assert kinds.count("response.done") == 2


@pytest.mark.parametrize(
    ("message", "code", "param"),
    [
        ("{not json", "invalid_json", None),
        ("[1]", "invalid_type", None),
        ({"type": "response.dance"}, "invalid_value", "type"),
        ({"type": "session.update"}, "missing_required_parameter", "session"),
        ({"type": "session.update", "session": {}}, "missing_required_parameter", "session.type"),
        (
            {
                "type": "session.update",
                "session": {"type": "realtime", "output_modalities": ["text", "audio"]},
            },
            "invalid_value",
            "session.output_modalities",
        ),
        (
            {
                "type": "session.update",
                "session": {
                    "type": "realtime",
                    "audio": {"input": {"format": {"type": "audio/flac"}}},
                },
            },
            "invalid_value",
            "session.audio.input.format.type",
        ),
        ({"type": "input_audio_buffer.append", "audio": "!!"}, "invalid_value", "audio"),
        (
            {"type": "conversation.item.create", "item": {"type": "message", "role": "robot"}},
            "invalid_value",
            "item.role",
        ),
        ({"type": "conversation.item.retrieve", "item_id": "item_x"}, "invalid_value", "item_id"),
        ({"type": "conversation.item.delete"}, "missing_required_parameter", "item_id"),
        ({"type": "response.cancel"}, "response_cancel_not_active", None),
        (
            {"type": "response.create", "response": {"conversation": "other"}},
            "invalid_value",
            "response.conversation",
        ),
    ],
)
def test_bad_messages_get_the_realtime_error(message: Any, code: str, param: str | None) -> None:
    emulation = realtime()
    due(emulation, 0.0)
    if isinstance(message, dict):
        message = {**message, "event_id": "evt_client_1"}
    send(emulation, 0.0, message)
    answers = due(emulation, 0.0)
    assert len(answers) == 1 and answers[0]["type"] == "error"
    error = answers[0]["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)
    assert error["event_id"] == ("evt_client_1" if isinstance(message, dict) else None)
    assert not emulation.closed


def test_items_are_placed_retrieved_and_deleted() -> None:
    emulation = realtime()
    due(emulation, 0.0)

    def create(item_id: str, previous: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": "conversation.item.create",
            "item": {
                "id": item_id,
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": item_id}],
            },
        }
        if previous is not None:
            message["previous_item_id"] = previous
        send(emulation, 0.0, message)
        added, done = due(emulation, 0.0)
        assert (added["type"], done["type"]) == (
            "conversation.item.added",
            "conversation.item.done",
        )
        return added

    assert create("a")["previous_item_id"] is None
    assert create("c")["previous_item_id"] == "a"
    assert create("b", previous="a")["previous_item_id"] == "a"
    assert create("z", previous="root")["previous_item_id"] is None
    send(emulation, 0.0, {"type": "conversation.item.retrieve", "item_id": "b"})
    retrieved = due(emulation, 0.0)[0]
    assert retrieved["item"] == {
        "id": "b",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_text", "text": "b"}],
    }
    send(emulation, 0.0, {"type": "conversation.item.delete", "item_id": "b"})
    deleted = due(emulation, 0.0)
    assert [(m["type"], m["item_id"]) for m in deleted] == [("conversation.item.deleted", "b")]
    # The reply answers the last user message of the conversation in its order.
    send(emulation, 0.0, TEXT_ONLY, ASK)
    text = "".join(
        m.get("delta", "") for m in due(emulation, 0.0) if m["type"] == "response.output_text.delta"
    )
    assert text == "Emulated reply from gpt-realtime. You said: c"


def test_g711_input_drives_voice_activity() -> None:
    emulation = realtime()
    send(
        emulation,
        0.0,
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "output_modalities": ["text"],
                "audio": {"input": {"format": {"type": "audio/pcmu"}}},
            },
        },
    )
    due(emulation, 0.0)
    speech = ulaw_encode(tone("hello", seconds=0.3, rate=8000)) + ulaw_encode(bytes(2 * 8 * 250))
    for at in range(0, len(speech), 800):  # 100 ms appends
        chunk = base64.b64encode(speech[at : at + 800]).decode()
        send(emulation, 0.0, {"type": "input_audio_buffer.append", "audio": chunk})
    kinds = [
        (m["type"], m.get("audio_start_ms", m.get("audio_end_ms"))) for m in due(emulation, 0.0)
    ]
    assert kinds[:3] == [
        ("input_audio_buffer.speech_started", 0),
        ("input_audio_buffer.speech_stopped", 500),
        ("input_audio_buffer.committed", None),
    ]


def test_ids_are_deterministic() -> None:
    def run() -> list[dict[str, Any]]:
        emulation = realtime()
        send(emulation, 0.0, TEXT_ONLY, ASK)
        return due(emulation, 0.0)

    assert run() == run()


def test_scenarios_match_the_family_name() -> None:
    scenarios = [
        {"match": {"dialect": "openai_realtime"}, "reply": {"text": "realtime"}},
        {"match": {"dialect": "openai_responses"}, "reply": {"text": "responses"}},
    ]
    emulation = realtime(scenarios)
    send(emulation, 0.0, TEXT_ONLY, ASK)
    assert [
        m["delta"] for m in due(emulation, 0.0) if m["type"] == "response.output_text.delta"
    ] == ["realtime"]
    sockets = SocketEmulation(Emulator(parse_scenarios(scenarios)), "openai_responses_ws")
    sockets.start(0.0)
    send(sockets, 0.0, {"type": "response.create", "model": "gpt-5.4-mini", "input": "x"})
    assert [m["delta"] for m in due(sockets, 0.0) if m["type"] == "response.output_text.delta"] == [
        "responses"
    ]


def test_the_session_reads_every_message_strictly() -> None:
    emulation = realtime(
        [{"reply": {"text": "Hi", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]}}]
    )
    session = open_session("openai_realtime", strict=True)
    send(emulation, 0.0, ASK)
    for message in due(emulation, 0.0):
        session.feed(json.dumps(message))
    assert session.close() == []


@pytest.mark.parametrize(
    "faults",
    [
        {"close": {"code": 1005}},
        {"close": {"after": -1}},
        {"close": {"reason": "x" * 124}},
        {"expire_after": -1},
        {"interrupt": {"pause": -0.5}},
    ],
)
def test_socket_faults_are_checked(faults: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError):
        parse_scenarios([{"faults": faults}])


def test_timing_audio_fields_are_checked() -> None:
    with pytest.raises(ScenarioError):
        parse_scenarios([{"timing": {"audio_burst": 0}}])
    with pytest.raises(ScenarioError):
        parse_scenarios([{"timing": {"audio_delay": -1}}])


def test_plain_request_to_a_socket_endpoint_is_426() -> None:
    with ServerThread(Emulator()) as server:
        response = httpx.get(server.base_url + "/openai/v1/realtime")
        index = httpx.get(server.base_url + "/").json()
    assert response.status_code == 426
    assert response.headers["upgrade"] == "websocket"
    assert response.json()["error"]["code"] == "upgrade_required"
    assert index["websockets"] == [
        {"path": "/openai/v1/responses", "family": "openai_responses_ws"},
        {"path": "/openai/v1/realtime", "family": "openai_realtime"},
        {"path": "/xai/v1/responses", "family": "xai_responses_ws"},
        {"path": "/xai/v1/realtime", "family": "xai_realtime"},
        {"path": "/xai/v1/tts", "family": "xai_tts"},
        {"path": "/xai/v1/stt", "family": "xai_stt"},
        *(
            {"path": f"/gemini/ws/google.ai.generativelanguage.{version}", "family": "gemini_live"}
            for version in (
                "v1beta.GenerativeService.BidiGenerateContent",
                "v1alpha.GenerativeService.BidiGenerateContent",
                "v1.GenerativeService.BidiGenerateContent",
                "v1alpha.GenerativeService.BidiGenerateContentConstrained",
            )
        ),
    ]


def test_polystreams_own_server_serves_the_sockets() -> None:
    # polystream's HTTP/1.1 server takes WebSocket upgrades; a plain GET is told to upgrade.
    server = OwnServer(create_app(Emulator()))
    try:
        url = f"ws://127.0.0.1:{server.port}/openai/v1/realtime?model=gpt-realtime"
        with websockets.sync.client.connect(
            url, additional_headers={"Authorization": "Bearer x"}
        ) as ws:
            first = json.loads(ws.recv())
        plain = httpx.get(url.replace("ws://", "http://"), headers={"Authorization": "Bearer x"})
    finally:
        server.stop()
    assert first["type"] == "session.created"
    assert plain.status_code == 426


def test_a_connection_without_a_model_is_refused() -> None:
    emulation = SocketEmulation(Emulator(), "openai_realtime", query={})
    emulation.start(0.0)
    sends = emulation.due(0.0)
    assert json.loads(sends[0].text or "")["error"] == {
        "type": "invalid_request_error",
        "code": "missing_required_parameter",
        "message": "Missing required parameter: 'model'.",
        "param": "model",
        "event_id": None,
    }
    assert (sends[1].close, sends[1].reason) == (1008, "missing_required_parameter")
    assert emulation.closed and emulation.wake is None
    emulation.receive(json.dumps(ASK), 0.0)  # (nothing more once closed)
    assert emulation.due(0.0) == []


def test_every_ga_client_message_is_served() -> None:
    from polystream.dialects._realtime_api.wire import CLIENT_MESSAGES

    emulation = realtime()
    due(emulation, 0.0)
    for name in sorted(CLIENT_MESSAGES):
        send(emulation, 0.0, {"type": name})
        for answer in due(emulation, 0.0):
            assert answer.get("error", {}).get("param") != "type", name
