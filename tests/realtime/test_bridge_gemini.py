"""The realtime bridge between OpenAI Realtime and Gemini Live, sans-I/O, each way, an
emulated upstream behind: text, tool calls (a Gemini turn that goes on after its tool
results is two OpenAI responses), audio resampled between OpenAI's 24 kHz and Gemini's
16 kHz input, interruption, usage, and what cannot cross (Gemini's video to OpenAI,
OpenAI's out-of-band responses to Gemini) refused in the client's family."""

from __future__ import annotations

import base64
import json
from typing import Any

from polystream.audio import PCM16_16K, PCM16_24K, convert
from polystream.scenario import Emulator
from polystream.scenario._format import Scenario, Timing
from tests.realtime.bridge_harness import Harness, tone
from tests.realtime.test_bridge import TOOL_SCENARIOS, TOOLS, audio_of, types, user_text

GEMINI = "gemini-live-2.5-flash-preview"
SETUP_TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ]
    }
]


def gemini_audio(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.b64decode(part["inlineData"]["data"])
        for m in messages
        for part in (m.get("serverContent", {}).get("modelTurn", {}).get("parts") or ())
        if "inlineData" in part
    )


def gemini_text(messages: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for m in messages
        for part in (m.get("serverContent", {}).get("modelTurn", {}).get("parts") or ())
        if "text" in part
    )


# -- an OpenAI Realtime client, a Gemini Live upstream ---------------------------------


def test_openai_client_to_gemini_text_and_usage() -> None:
    h = Harness("openai_realtime", "gemini_live", GEMINI)
    assert types(h.take()) == ["session.created"]
    assert h.take_sent() == []  # (the setup waits for the configuration)
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
    assert h.take_sent() == [
        {
            "setup": {
                "generationConfig": {"responseModalities": ["TEXT"]},
                "realtimeInputConfig": {"automaticActivityDetection": {"disabled": True}},
                "model": f"models/{GEMINI}",
                "systemInstruction": {"parts": [{"text": "Be brief."}]},
            }
        },
        {
            "clientContent": {
                "turns": [{"role": "user", "parts": [{"text": "Hello"}]}],
                "turnComplete": False,
            }
        },
        {"clientContent": {"turnComplete": True}},
    ]
    got = h.take()
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == f"Emulated reply from {GEMINI}. You said: Hello"
    done = got[-1]["response"]
    assert done["status"] == "completed"
    meta = next(m["usageMetadata"] for m in h.upstream_messages() if "usageMetadata" in m)
    assert done["usage"]["input_tokens"] == meta["promptTokenCount"]
    assert done["usage"]["output_tokens"] == meta["responseTokenCount"]
    assert done["usage"]["total_tokens"] == meta["totalTokenCount"]


def test_openai_client_to_gemini_tool_call() -> None:
    h = Harness("openai_realtime", "gemini_live", GEMINI, Emulator(TOOL_SCENARIOS))
    h.take()
    h.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "output_modalities": ["text"], "tools": TOOLS},
        }
    )
    h.send(user_text("Weather in Paris?"))
    h.send({"type": "response.create"})
    assert h.take_sent()[0]["setup"]["tools"] == SETUP_TOOLS
    got = h.take()
    done = got[-1]["response"]
    assert done["status"] == "completed"
    assert [(o["type"], o["call_id"], o["name"], o["arguments"]) for o in done["output"]] == [
        ("function_call", "call_7", "get_weather", '{"city":"Paris"}')
    ]
    # The result goes back by id and name; the Gemini turn goes on, as the next response.
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
    h.send({"type": "response.create"})
    assert h.take_sent() == [
        {
            "toolResponse": {
                "functionResponses": [
                    {"id": "call_7", "name": "get_weather", "response": {"sky": "clear"}}
                ]
            }
        }
    ]
    got = h.take()
    assert types(got)[2] == "response.created"
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == "It is sunny."
    assert got[-1]["response"]["status"] == "completed"
    assert got[-1]["response"]["usage"]["total_tokens"] == 34


def test_openai_client_audio_to_gemini_is_resampled_to_16k() -> None:
    h = Harness("openai_realtime", "gemini_live", GEMINI)
    h.take()
    h.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}},
        }
    )
    spoken = tone(0.5, 24000)
    for at in range(0, len(spoken), 4800):
        chunk = base64.b64encode(spoken[at : at + 4800]).decode()
        h.send({"type": "input_audio_buffer.append", "audio": chunk})
    h.send({"type": "input_audio_buffer.commit"})
    h.send({"type": "response.create"})
    sent = h.take_sent()
    assert sent[0]["setup"]["generationConfig"] == {"responseModalities": ["AUDIO"]}
    assert sent[0]["setup"]["outputAudioTranscription"] == {}
    assert sent[1] == {"realtimeInput": {"activityStart": {}}}
    assert sent[-1] == {"realtimeInput": {"activityEnd": {}}}  # (no turnComplete: it asks)
    blobs = [m["realtimeInput"]["audio"] for m in sent if "audio" in m.get("realtimeInput", {})]
    assert {blob["mimeType"] for blob in blobs} == {"audio/pcm;rate=16000"}
    sent_audio = b"".join(base64.b64decode(blob["data"]) for blob in blobs)
    assert sent_audio == convert(spoken, PCM16_24K, PCM16_16K)
    got = h.take()
    # Gemini speaks at 24 kHz, as the OpenAI client hears: no conversion.
    assert audio_of(got) == gemini_audio(h.upstream_messages())
    assert len(audio_of(got)) > 0
    transcript = [m for m in got if m["type"] == "response.output_audio_transcript.done"]
    assert transcript[0]["transcript"] == f"Emulated reply from {GEMINI}."
    assert got[-1]["response"]["status"] == "completed"


def test_new_input_interrupts_the_gemini_turn() -> None:
    """Gemini cuts a turn when new input comes (``interrupted``): the OpenAI client's
    response ends cancelled; its own cancel sends nothing (Gemini has none) and the
    rest of the turn is dropped."""
    slow = Emulator([Scenario(timing=Timing(delay=1.0))])
    h = Harness("openai_realtime", "gemini_live", GEMINI, slow)
    h.take()
    h.send(
        {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}}
    )
    h.send(user_text("Tell me a story"))
    h.send({"type": "response.create"})
    h.at(3.5)
    first = h.take()
    assert "response.output_text.delta" in types(first)
    h.take_sent()
    h.send(user_text("Stop."))
    assert h.take_sent() == [
        {
            "clientContent": {
                "turns": [{"role": "user", "parts": [{"text": "Stop."}]}],
                "turnComplete": False,
            }
        }
    ]
    got = h.take()
    done = [m for m in got if m["type"] == "response.done"]
    assert done[0]["response"]["status"] == "cancelled"
    assert done[0]["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    h.send({"type": "response.create"})
    h.at(100.0)
    got = h.take()
    text = "".join(m["delta"] for m in got if m["type"] == "response.output_text.delta")
    assert text == f"Emulated reply from {GEMINI}. You said: Stop."
    # The client's own cancel: its response ends at once, nothing goes upstream.
    h.send({"type": "response.create"})
    h.take_sent()
    h.at(101.5)
    h.take()
    h.send({"type": "response.cancel"})
    assert h.take_sent() == []
    assert h.take()[-1]["response"]["status"] == "cancelled"


def test_what_gemini_cannot_take_is_refused() -> None:
    h = Harness("openai_realtime", "gemini_live", GEMINI)
    h.take()
    h.send({"type": "response.create", "response": {"conversation": "none"}})
    got = h.take()
    assert types(got) == ["error"]
    assert got[0]["error"]["code"] == "unsupported_feature"
    assert got[0]["error"]["message"] == (
        'gemini_live cannot give a reply out of the conversation (conversation: "none") '
        "(not carried: this openai_realtime connection is translated to a gemini_live "
        "upstream)"
    )
    assert h.take_sent() == []  # (not even the setup)
    # A configuration that changes after the setup.
    h.send(user_text("Hi"))
    assert [list(m) for m in h.take_sent()] == [["setup"], ["clientContent"]]
    h.take()
    h.send(
        {"type": "session.update", "session": {"type": "realtime", "instructions": "Now French."}}
    )
    got = h.take()
    assert types(got) == ["session.updated", "error"]
    assert got[1]["error"]["message"].startswith(
        "gemini_live takes its configuration once, in the setup"
    )
    assert h.take_sent() == []


# -- a Gemini Live client, an OpenAI Realtime upstream -----------------------------------


def gemini_setup(**fields: Any) -> dict[str, Any]:
    return {"setup": {"model": "models/gpt-realtime", **fields}}


def test_gemini_client_to_openai_text_and_tools() -> None:
    h = Harness("gemini_live", "openai_realtime", "gpt-realtime", Emulator(TOOL_SCENARIOS))
    assert h.take() == []
    h.send(
        gemini_setup(
            generationConfig={"responseModalities": ["TEXT"]},
            systemInstruction={"parts": [{"text": "Be brief."}]},
            tools=SETUP_TOOLS,
        )
    )
    assert [list(m) for m in h.take()] == [["setupComplete"]]
    assert h.take_sent()[-1]["session"] == {
        "type": "realtime",
        "instructions": "Be brief.",
        "tools": TOOLS,
        "output_modalities": ["text"],
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "turn_detection": {"type": "server_vad"},
            },
            "output": {"format": {"type": "audio/pcm", "rate": 24000}},
        },
    }
    h.send(
        {
            "clientContent": {
                "turns": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
                "turnComplete": True,
            }
        }
    )
    assert h.take_sent() == [
        {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Weather in Paris?"}],
            },
        },
        {"type": "response.create", "response": {"output_modalities": ["text"]}},
    ]
    assert h.take() == [
        {
            "toolCall": {
                "functionCalls": [
                    {"id": "call_7", "name": "get_weather", "args": {"city": "Paris"}}
                ]
            }
        }
    ]
    h.send(
        {
            "toolResponse": {
                "functionResponses": [
                    {"id": "call_7", "name": "get_weather", "response": {"sky": "clear"}}
                ]
            }
        }
    )
    assert h.take_sent() == [
        {
            "type": "conversation.item.create",
            "item": {
                "type": "function_call_output",
                "call_id": "call_7",
                "output": '{"sky":"clear"}',
            },
        },
        {"type": "response.create", "response": {"output_modalities": ["text"]}},
    ]
    got = h.take()
    assert gemini_text(got) == "It is sunny."
    assert got[-1] == {
        "serverContent": {"turnComplete": True},
        "usageMetadata": {"promptTokenCount": 30, "responseTokenCount": 4, "totalTokenCount": 34},
    }


def test_gemini_client_audio_to_openai_is_resampled_to_24k() -> None:
    h = Harness("gemini_live", "openai_realtime", "gpt-realtime")
    h.send(
        gemini_setup(
            realtimeInputConfig={"automaticActivityDetection": {"disabled": True}},
            outputAudioTranscription={},
        )
    )
    h.take()
    sent = h.take_sent()
    assert sent[-1]["session"]["output_modalities"] == ["audio"]
    assert sent[-1]["session"]["audio"]["input"]["turn_detection"] is None
    spoken = tone(0.5, 16000)
    h.send({"realtimeInput": {"activityStart": {}}})
    for at in range(0, len(spoken), 3200):
        blob = {
            "data": base64.b64encode(spoken[at : at + 3200]).decode(),
            "mimeType": "audio/pcm;rate=16000",
        }
        h.send({"realtimeInput": {"audio": blob}})
    h.send({"realtimeInput": {"activityEnd": {}}})
    sent = h.take_sent()
    assert types(sent)[-2:] == ["input_audio_buffer.commit", "response.create"]
    appended = b"".join(
        base64.b64decode(m["audio"]) for m in sent if m["type"] == "input_audio_buffer.append"
    )
    assert appended == convert(spoken, PCM16_16K, PCM16_24K)
    got = h.take()
    assert gemini_audio(got) == audio_of(h.upstream_messages())
    said = "".join(
        m["serverContent"]["outputTranscription"]["text"]
        for m in got
        if "outputTranscription" in m.get("serverContent", {})
    )
    assert said == "Emulated reply from gpt-realtime."
    assert got[-1]["serverContent"] == {"turnComplete": True}
    assert got[-1]["usageMetadata"]["responseTokensDetails"][0]["modality"] == "AUDIO"


def test_a_gemini_client_interrupts_the_openai_reply() -> None:
    slow = Emulator([Scenario(timing=Timing(delay=1.0))])
    h = Harness("gemini_live", "openai_realtime", "gpt-realtime", slow)
    h.send(gemini_setup(generationConfig={"responseModalities": ["TEXT"]}))
    h.send({"realtimeInput": {"text": "Tell me a story"}})
    h.at(9.5)
    assert gemini_text(h.take())
    upstream_rid = next(
        m["response"]["id"] for m in h.upstream_messages() if m["type"] == "response.created"
    )
    h.take_sent()
    h.send({"realtimeInput": {"activityStart": {}}})
    assert h.take() == [
        {"serverContent": {"interrupted": True}},
        {"serverContent": {"turnComplete": True}},
    ]
    assert h.take_sent() == [{"type": "response.cancel", "response_id": upstream_rid}]
    h.at(100.0)
    assert h.take() == []  # (the rest of the reply reaches nobody)


def test_gemini_video_to_openai_closes_the_connection() -> None:
    h = Harness("gemini_live", "openai_realtime", "gpt-realtime")
    h.send(gemini_setup())
    h.take()
    h.take_sent()
    frame = {"data": base64.b64encode(b"\xff\xd8\xff\xe0jpeg").decode(), "mimeType": "image/jpeg"}
    h.send({"realtimeInput": {"video": frame}})
    assert h.take_sent() == []
    # Gemini reports an invalid request by closing with 1007 (what the service does).
    assert h.closed == (
        1007,
        "openai_realtime takes no video input (not carried: this gemini_live connection is "
        "translated to a openai_realtime upstream)",
    )


def test_a_gemini_setup_with_a_provider_tool_is_refused() -> None:
    h = Harness("gemini_live", "openai_realtime", "gpt-realtime")
    h.send(gemini_setup(tools=[{"googleSearch": {}}]))
    assert h.closed is not None
    assert h.closed[0] == 1007
    assert h.closed[1].startswith("openai_realtime does not run the 'googleSearch' tool")
    assert json.dumps(h.take()) == '[{"setupComplete": {"sessionId": "session-cad4a5be62ba01bf"}}]'
