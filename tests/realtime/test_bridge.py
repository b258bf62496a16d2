"""The realtime bridge, sans-I/O: a client of one conversation family served by an
emulated upstream of another (OpenAI Realtime <-> xAI Voice Agent), each side in its
own family's messages: text, audio (resampled where the rates differ), tool calls,
voice activity and the replies the upstream begins itself, interruption, usage, and
what cannot cross refused with an error in the client's family."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from polystream.audio import PCM16_16K, PCM16_24K, convert
from polystream.errors import LocalProtocolError
from polystream.realtime._bridge import Bridge, bridge_refusal
from polystream.scenario import Emulator
from polystream.scenario._format import (
    Match,
    Reply,
    Scenario,
    Timing,
    ToolCallSpec,
    UsageSpec,
)
from tests.realtime.bridge_harness import Harness, tone

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
TOOL_SCENARIOS = [
    Scenario(
        match=Match(tools=True, tool_result=False),
        reply=Reply(
            tool_calls=[ToolCallSpec(name="get_weather", arguments={"city": "Paris"}, id="call_7")],
            usage=UsageSpec(input_tokens=21, output_tokens=9),
        ),
    ),
    Scenario(
        match=Match(tool_result=True),
        reply=Reply(text="It is sunny.", usage=UsageSpec(input_tokens=30, output_tokens=4)),
    ),
]


def user_text(text: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.create",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
    }


def types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


def upstream_done(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.upstream_messages() if m["type"] == "response.done"]


def audio_of(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.b64decode(m["delta"]) for m in messages if m["type"] == "response.output_audio.delta"
    )


def test_which_families_bridge() -> None:
    assert bridge_refusal("openai_realtime", "xai_realtime") is None
    assert bridge_refusal("xai_realtime", "openai_realtime") is None
    assert bridge_refusal("openai_realtime", "openai_responses_ws") == (
        "openai_responses_ws conversations cannot be translated to or from another family"
    )
    assert bridge_refusal("xai_stt", "openai_realtime") == (
        "xai_stt conversations cannot be translated to or from another family"
    )
    with pytest.raises(LocalProtocolError, match="xai_tts conversations"):
        Bridge("xai_tts", "openai_realtime", model="m")


def test_openai_client_to_xai_upstream_text() -> None:
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    assert types(h.take()) == ["session.created"]
    # The upstream is configured as the client's session is (OpenAI's defaults: voice,
    # server VAD), in xAI's shape.
    assert h.take_sent() == [
        {
            "type": "session.update",
            "session": {
                "instructions": "",
                "tools": [],
                "turn_detection": {"type": "server_vad"},
                "audio": {
                    "input": {"format": {"type": "audio/pcm", "rate": 24000}},
                    "output": {"format": {"type": "audio/pcm", "rate": 24000}},
                },
            },
        }
    ]
    h.send(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "instructions": "Be brief.",
                "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None}},
            },
        }
    )
    h.send(user_text("Hello"))
    h.send({"type": "response.create"})
    sent = h.take_sent()
    item_id = sent[1]["item"]["id"]
    assert sent == [
        {
            "type": "session.update",
            "session": {
                "instructions": "Be brief.",
                "tools": [],
                "turn_detection": None,
                "audio": {
                    "input": {"format": {"type": "audio/pcm", "rate": 24000}},
                    "output": {"format": {"type": "audio/pcm", "rate": 24000}},
                },
            },
        },
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello"}],
                "id": item_id,
            },
        },
        {"type": "response.create", "response": {"modalities": ["text"]}},
    ]
    got = h.take()
    assert types(got) == [
        "session.updated",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 7,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert got[1]["item"]["id"] == item_id
    text = "Emulated reply from grok-voice. You said: Hello"
    assert "".join(m["delta"] for m in got if m["type"].endswith("text.delta")) == text
    done = got[-1]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"] == [{"type": "output_text", "text": text}]
    # The usage is the upstream's.
    upstream_usage = upstream_done(h)[0]["response"]["usage"]
    assert done["usage"] == {
        "total_tokens": upstream_usage["total_tokens"],
        "input_tokens": upstream_usage["input_tokens"],
        "output_tokens": upstream_usage["output_tokens"],
        "input_token_details": {
            "text_tokens": upstream_usage["input_tokens"],
            "audio_tokens": 0,
            "image_tokens": 0,
            "cached_tokens": 0,
        },
        "output_token_details": {"text_tokens": upstream_usage["output_tokens"], "audio_tokens": 0},
    }
    assert done["usage"]["total_tokens"] == 24


def test_xai_client_to_openai_upstream_text() -> None:
    h = Harness("xai_realtime", "openai_realtime", "gpt-realtime")
    assert types(h.take()) == ["conversation.created", "session.created"]
    h.send({"type": "session.update", "session": {"turn_detection": None}})
    h.send(user_text("Hi"))
    h.send({"type": "response.create", "response": {"modalities": ["text"]}})
    sent = h.take_sent()
    assert [m["type"] for m in sent] == [
        "session.update",
        "session.update",
        "conversation.item.create",
        "response.create",
    ]
    # OpenAI's GA shape: the session's type, one output modality, turn detection under
    # the input audio.
    assert sent[1]["session"] == {
        "type": "realtime",
        "instructions": "",
        "tools": [],
        "output_modalities": ["audio"],
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}},
        },
    }
    assert sent[3] == {"type": "response.create", "response": {"output_modalities": ["text"]}}
    got = h.take()
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == "Emulated reply from gpt-realtime. You said: Hi"
    # xAI's client side: no rate limits of the gateway's invention.
    assert "rate_limits.updated" not in types(got)
    assert got[-1]["type"] == "response.done"
    assert (
        got[-1]["response"]["usage"]["total_tokens"]
        == (upstream_done(h)[0]["response"]["usage"]["total_tokens"])
    )


@pytest.mark.parametrize(
    ("client", "upstream", "model"),
    [
        ("openai_realtime", "xai_realtime", "grok-voice"),
        ("xai_realtime", "openai_realtime", "gpt-realtime"),
    ],
)
def test_tool_calls_cross(client: str, upstream: str, model: str) -> None:
    h = Harness(client, upstream, model, Emulator(TOOL_SCENARIOS))
    h.take()
    h.take_sent()
    session: dict[str, Any] = {"tools": TOOLS}
    if client == "openai_realtime":
        session.update(type="realtime", output_modalities=["text"])
    h.send({"type": "session.update", "session": session})
    h.send(user_text("Weather in Paris?"))
    h.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    sent = h.take_sent()
    assert sent[0]["session"]["tools"] == TOOLS
    got = h.take()
    calls = [m for m in got if m["type"] == "response.function_call_arguments.done"]
    assert len(calls) == 1
    assert calls[0]["call_id"] == "call_7"
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["arguments"] == '{"city":"Paris"}'
    done = got[-1]["response"]
    assert done["output"][0]["type"] == "function_call"
    assert done["output"][0]["call_id"] == "call_7"
    assert done["usage"]["input_tokens"] == 21
    assert done["usage"]["output_tokens"] == 9
    # The result goes back by the call's id; the reply that uses it follows.
    h.send(
        {
            "type": "conversation.item.create",
            "item": {
                "type": "function_call_output",
                "call_id": "call_7",
                "output": '{"sky":"clear"}',
            },
        }
    )
    h.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    sent = h.take_sent()
    assert sent[0] == {
        "type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_7", "output": '{"sky":"clear"}'},
    }
    got = h.take()
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == "It is sunny."
    assert got[-1]["response"]["usage"]["total_tokens"] == 34


def test_audio_is_resampled_both_ways() -> None:
    """An xAI client at 16 kHz, an OpenAI upstream at 24 kHz (its only PCM rate)."""
    h = Harness("xai_realtime", "openai_realtime", "gpt-realtime")
    h.take()
    h.take_sent()
    pcm16 = {"type": "audio/pcm", "rate": 16000}
    h.send(
        {
            "type": "session.update",
            "session": {
                "turn_detection": None,
                "audio": {"input": {"format": pcm16}, "output": {"format": pcm16}},
            },
        }
    )
    sent = h.take_sent()
    assert sent[0]["session"]["audio"] == {
        "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None},
        "output": {"format": {"type": "audio/pcm", "rate": 24000}},
    }
    spoken = tone(0.5, 16000)
    for at in range(0, len(spoken), 3200):
        h.send(
            {
                "type": "input_audio_buffer.append",
                "audio": base64.b64encode(spoken[at : at + 3200]).decode(),
            }
        )
    h.send({"type": "input_audio_buffer.commit"})
    h.send({"type": "response.create", "response": {"modalities": ["audio"]}})
    sent = h.take_sent()
    appended = b"".join(
        base64.b64decode(m["audio"]) for m in sent if m["type"] == "input_audio_buffer.append"
    )
    # Chunk by chunk, the same audio as converted whole.
    assert appended == convert(spoken, PCM16_16K, PCM16_24K)
    assert [m["type"] for m in sent][-2:] == ["input_audio_buffer.commit", "response.create"]
    assert sent[-1]["response"] == {"output_modalities": ["audio"]}
    got = h.take()
    upstream_audio = audio_of(h.upstream_messages())
    assert len(upstream_audio) > 0
    assert audio_of(got) == convert(upstream_audio, PCM16_24K, PCM16_16K)
    transcript = [m for m in got if m["type"] == "response.output_audio_transcript.done"]
    assert transcript[0]["transcript"] == "Emulated reply from gpt-realtime."
    assert (
        got[-1]["response"]["usage"]["output_token_details"]["audio_tokens"]
        == (upstream_done(h)[0]["response"]["usage"]["output_token_details"]["audio_tokens"])
    )


def test_the_same_rate_is_not_resampled() -> None:
    """xAI takes 16 kHz itself: an OpenAI client's 24 kHz is asked of it as is."""
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    h.take()
    h.take_sent()
    spoken = tone(0.2, 24000)
    h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(spoken).decode()})
    sent = h.take_sent()
    assert sent == [
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(spoken).decode()}
    ]


def test_the_upstreams_voice_activity_answers_the_client() -> None:
    """Server VAD on both sides: the upstream hears the user, its reply becomes the
    client's (no response.create is sent), and its voice activity the client's."""
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    h.take()
    h.take_sent()
    for chunk in (tone(0.6, 24000), bytes(48000)):
        h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(chunk).decode()})
    assert types(h.take_sent()) == ["input_audio_buffer.append", "input_audio_buffer.append"]
    got = h.take()
    assert types(got)[:7] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
    ]
    upstream = {m["type"]: m for m in h.upstream_messages()}
    assert (
        got[0]["audio_start_ms"] == upstream["input_audio_buffer.speech_started"]["audio_start_ms"]
    )
    assert got[1]["audio_end_ms"] == upstream["input_audio_buffer.speech_stopped"]["audio_end_ms"]
    assert got[-1]["type"] == "response.done"
    assert got[-1]["response"]["status"] == "completed"
    assert got[-1]["response"]["output_modalities"] == ["audio"]
    assert audio_of(got) == audio_of(h.upstream_messages())


def test_interruption_cancels_and_truncates_upstream() -> None:
    slow = Emulator([Scenario(timing=Timing(delay=1.0))])
    h = Harness("openai_realtime", "xai_realtime", "grok-voice", slow)
    h.take()
    h.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}},
        }
    )
    h.send(user_text("Tell me a story"))
    h.send({"type": "response.create"})
    h.at(9.5)  # part of the spoken reply
    got = h.take()
    deltas = [m for m in got if m["type"] == "response.output_audio.delta"]
    assert deltas
    item_id = deltas[0]["item_id"]
    response_id = deltas[0]["response_id"]
    upstream_rid = next(
        m["response"]["id"] for m in h.upstream_messages() if m["type"] == "response.created"
    )
    upstream_item = next(
        m["item"]["id"] for m in h.upstream_messages() if m["type"] == "response.output_item.added"
    )
    h.take_sent()
    # Barge-in: what was played is kept, the rest of the reply is cancelled.
    h.send(
        {
            "type": "conversation.item.truncate",
            "item_id": item_id,
            "content_index": 0,
            "audio_end_ms": 50,
        }
    )
    h.send({"type": "response.cancel", "response_id": response_id})
    assert h.take_sent() == [
        {
            "type": "conversation.item.truncate",
            "item_id": upstream_item,
            "content_index": 0,
            "audio_end_ms": 50,
        },
        {"type": "response.cancel", "response_id": upstream_rid},
    ]
    got = h.take()
    assert types(got)[0] == "conversation.item.truncated"
    assert got[-1]["type"] == "response.done"
    assert got[-1]["response"]["status"] == "cancelled"
    assert got[-1]["response"]["status_details"] == {
        "type": "cancelled",
        "reason": "client_cancelled",
    }
    h.at(100.0)  # the upstream's own end of it reaches nobody
    assert [m for m in h.take() if m["type"].startswith("response.")] == []


def test_a_cancel_before_the_upstream_began_waits_for_its_id() -> None:
    slow = Emulator([Scenario(timing=Timing(first_event=5.0))])
    h = Harness("openai_realtime", "xai_realtime", "grok-voice", slow)
    h.take()
    h.send(user_text("Hi"))
    h.take_sent()
    bridge = h.bridge
    step = bridge.client('{"type":"response.create"}')
    assert step.upstream == ['{"type":"response.create","response":{"modalities":["audio"]}}']
    assert step.client == []  # (response.created comes with the upstream's)
    step = bridge.client('{"type":"response.cancel"}')
    assert step.upstream == []
    assert types(_json(step.client)) == ["response.done"]
    assert _json(step.client)[0]["response"]["status"] == "cancelled"
    created = (
        '{"type":"response.created","event_id":"e1","response":{"id":"resp_up",'
        '"object":"realtime.response","status":"in_progress","output":[]}}'
    )
    step = bridge.upstream(created)
    assert step.upstream == ['{"type":"response.cancel","response_id":"resp_up"}']
    assert step.client == []


def test_what_cannot_cross_is_refused_in_the_clients_family() -> None:
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    h.take()
    h.take_sent()
    image = {
        "type": "conversation.item.create",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}],
        },
    }
    h.send(image)
    assert h.take_sent() == []
    got = h.take()
    assert types(got) == ["conversation.item.added", "conversation.item.done", "error"]
    assert got[-1]["error"] == {
        "type": "invalid_request_error",
        "code": "unsupported_feature",
        "message": "xai_realtime takes no image input (not carried: this openai_realtime "
        "connection is translated to a xai_realtime upstream)",
        "param": None,
        "event_id": None,
    }

    h = Harness("xai_realtime", "openai_realtime", "gpt-realtime")
    h.take()
    h.take_sent()
    h.send({"type": "session.update", "session": {"tools": [{"type": "x_search"}]}})
    got = h.take()
    assert types(got) == ["session.updated", "error"]
    assert got[1]["error"]["message"] == (
        "openai_realtime does not run the 'x_search' tool (not carried: this xai_realtime "
        "connection is translated to a openai_realtime upstream)"
    )
    assert h.take_sent() == []
    # xAI's forced message (a line said verbatim): OpenAI has none.
    h.send(
        {
            "type": "conversation.item.create",
            "item": {
                "type": "force_message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "One moment."}],
            },
        }
    )
    assert h.take_sent() == []
    got = h.take()
    assert types(got) == ["error"]
    assert got[0]["error"]["code"] == "unsupported_feature"
    assert got[0]["error"]["message"] == (
        "openai_realtime cannot say a text verbatim (a forced message) (not carried: this "
        "xai_realtime connection is translated to a openai_realtime upstream)"
    )


def test_an_out_of_band_response_crosses_between_realtime_families() -> None:
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    h.take()
    h.take_sent()
    h.send(
        {
            "type": "response.create",
            "response": {
                "conversation": "none",
                "output_modalities": ["text"],
                "instructions": "Classify.",
            },
        }
    )
    assert h.take_sent() == [
        {
            "type": "response.create",
            "response": {
                "conversation": "none",
                "instructions": "Classify.",
                "modalities": ["text"],
            },
        }
    ]
    got = h.take()
    assert got[0]["type"] == "response.created"
    assert got[0]["response"]["conversation_id"] is None
    assert got[-1]["type"] == "response.done"
    assert "conversation.item.added" not in types(got)


def test_a_lost_upstream_fails_the_running_reply() -> None:
    slow = Emulator([Scenario(timing=Timing(delay=1.0))])
    h = Harness("openai_realtime", "xai_realtime", "grok-voice", slow)
    h.take()
    h.send(user_text("Hi"))
    h.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
    h.at(3.5)
    h.take()
    step = h.bridge.close()
    got = _json(step.client)
    assert got[-1]["type"] == "response.done"
    assert got[-1]["response"]["status"] == "failed"
    assert got[-1]["response"]["status_details"]["error"]["message"] == (
        "the upstream connection was lost"
    )


def _json(messages: list[str | bytes]) -> list[dict[str, Any]]:
    import json

    return [json.loads(m) for m in messages if isinstance(m, str)]


def test_a_spoken_reply_to_a_text_client_is_text() -> None:
    """The OpenAI client asks for text with turn detection on; xAI's replies to a turn
    it detected are spoken (its sessions have no modalities): the transcript is the
    client's text, the audio is left out."""
    h = Harness("openai_realtime", "xai_realtime", "grok-voice")
    h.send(
        {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}}
    )
    h.take()
    for chunk in (tone(0.6, 24000), bytes(48000)):
        h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(chunk).decode()})
    got = h.take()
    assert audio_of(h.upstream_messages())  # (the upstream spoke)
    assert [t for t in types(got) if "audio" in t and "buffer" not in t] == []
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == "Emulated reply from grok-voice."
    assert got[-1]["response"]["output"][0]["content"] == [
        {"type": "output_text", "text": "Emulated reply from grok-voice."}
    ]
